//! Reading conversations from files in the public benchmark layouts.
//!
//! This module owns turning a path into [`Conversation`](crate::conversation::Conversation)s:
//! it tells the layouts apart ([`detect_format`]), reads LoCoMo files ([`locomo`]) and BEAM
//! conversation directories ([`beam`]), parses their dates ([`time`]), repairs and resolves the
//! questions' gold evidence ([`evidence`]), and refuses input it cannot trust with an error
//! that names the file and the place; what every loader shares is `read.rs`'s. The loaders must not embed text or store anything: what they return is plain data for
//! `embed` and `store` to take from there (the `pipeline` module runs a whole ingest on top of
//! them).

pub mod beam;
pub mod evidence;
pub mod locomo;
pub(crate) mod read;
pub mod time;

pub use read::{DEFAULT_MAX_TURN_BYTES, LoadOptions, Loaded};
pub(crate) use read::{file_name, natural_cmp};

use std::fs;
use std::path::{Path, PathBuf};

use crate::conversation::SourceFormat;
use crate::error::{Error, Result};

/// The demo conversation `myelin demo` ingests: LoCoMo layout, written for this project.
pub const DEMO_JSON: &str = include_str!("../../datasets/demo.json");

/// What a path holds.
enum Layout {
    /// A LoCoMo file.
    LocomoFile,
    /// One BEAM conversation directory (`chat.json`, or BEAM-10M plans `plan-<n>/chat.json`).
    BeamDir(PathBuf),
    /// A directory of BEAM conversation directories, in load order.
    BeamDirs(Vec<PathBuf>),
}

/// Tells which layout `path` holds: a file is LoCoMo, except a BEAM `chat.json` itself; a
/// directory with a `chat.json`, or whose subdirectories have one, is BEAM.
pub fn detect_format(path: &Path) -> Result<SourceFormat> {
    Ok(match layout(path)? {
        Layout::LocomoFile => SourceFormat::Locomo,
        Layout::BeamDir(_) | Layout::BeamDirs(_) => SourceFormat::Beam,
    })
}

/// Loads every conversation at `path`: a LoCoMo file (a JSON list of samples), a BEAM
/// conversation directory (`chat.json`, optionally `probing_questions.json`; naming its
/// `chat.json` does the same), or a directory of BEAM conversation directories (loaded in
/// natural order of their names: `2` before `10`).
pub fn load_path(path: &Path, opts: &LoadOptions) -> Result<Loaded> {
    match layout(path)? {
        Layout::LocomoFile => locomo::load_file(path, opts),
        Layout::BeamDir(dir) => beam::load_dir(&dir, opts),
        Layout::BeamDirs(dirs) => {
            let mut loaded = Loaded::default();
            for dir in dirs {
                loaded.extend(beam::load_dir(&dir, opts)?);
            }
            Ok(loaded)
        }
    }
}

/// Loads the built-in demo conversation ([`DEMO_JSON`]).
pub fn load_demo() -> Result<Loaded> {
    locomo::parse_str(DEMO_JSON, Path::new("datasets/demo.json"), &LoadOptions::default())
}

fn layout(path: &Path) -> Result<Layout> {
    let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_file() {
        if path.file_name().is_some_and(|n| n == beam::CHAT_FILE) {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
            return Ok(Layout::BeamDir(dir.unwrap_or(Path::new(".")).to_path_buf()));
        }
        return Ok(Layout::LocomoFile);
    }
    if !meta.is_dir() {
        return Err(unknown(path, "neither a file nor a directory"));
    }
    if beam::chat_files(path).is_some() {
        return Ok(Layout::BeamDir(path.to_path_buf()));
    }
    let mut dirs = Vec::new();
    for entry in fs::read_dir(path).map_err(|e| Error::io(path, e))? {
        let entry = entry.map_err(|e| Error::io(path, e))?;
        let sub = entry.path();
        if sub.is_dir() && beam::chat_files(&sub).is_some() {
            dirs.push(sub);
        }
    }
    if dirs.is_empty() {
        return Err(unknown(
            path,
            "directory holds no chat.json (nor plan-<n>/chat.json), and none of its subdirectories does either",
        ));
    }
    dirs.sort_by(|a, b| natural_cmp(&file_name(a), &file_name(b)));
    Ok(Layout::BeamDirs(dirs))
}

fn unknown(path: &Path, what: &str) -> Error {
    Error::UnknownFormat {
        path: path.to_path_buf(),
        message: format!(
            "{what}; expected a LoCoMo JSON file, a BEAM conversation directory (with chat.json) \
             or a directory of BEAM conversation directories"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A minimal valid LoCoMo file with the given text in its only turn.
    fn locomo_with_text(text: &str) -> String {
        serde_json::json!([{
            "sample_id": "t-1",
            "conversation": {
                "speaker_a": "A", "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": text}]
            },
            "qa": []
        }])
        .to_string()
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        path
    }

    fn err_text(result: Result<Loaded>) -> String {
        match result {
            Ok(loaded) => {
                panic!("expected an error, loaded {} conversations", loaded.conversations.len())
            }
            Err(e) => e.to_string(),
        }
    }

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    }

    #[test]
    fn detects_the_layouts() {
        let tmp = tempfile::tempdir().unwrap();
        let file = write(tmp.path(), "x.json", locomo_with_text("hi").as_bytes());
        assert_eq!(detect_format(&file).unwrap(), SourceFormat::Locomo);
        let mini = fixture("tests/data/beam-mini");
        assert_eq!(detect_format(&mini).unwrap(), SourceFormat::Beam);
        assert_eq!(detect_format(&mini.join("1")).unwrap(), SourceFormat::Beam);
        let chat = mini.join("1").join("chat.json");
        assert_eq!(detect_format(&chat).unwrap(), SourceFormat::Beam);
        let by_file = load_path(&chat, &LoadOptions::default()).unwrap();
        let by_dir = load_path(&mini.join("1"), &LoadOptions::default()).unwrap();
        assert_eq!(by_file, by_dir, "naming chat.json loads its directory");
    }

    #[test]
    fn a_missing_path_is_an_io_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nowhere.json");
        let err = load_path(&missing, &LoadOptions::default()).unwrap_err();
        assert!(matches!(&err, Error::Io { path, .. } if *path == missing), "{err:?}");
        assert!(err.to_string().contains("nowhere.json"));
        assert!(matches!(detect_format(&missing), Err(Error::Io { .. })));
    }

    #[test]
    fn a_directory_without_chat_json_is_an_unknown_format() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "sub/notes.txt", b"nothing here");
        let err = load_path(tmp.path(), &LoadOptions::default()).unwrap_err();
        assert!(matches!(err, Error::UnknownFormat { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("chat.json") && text.contains("LoCoMo"), "{text}");
    }

    #[test]
    fn beam_directories_load_in_natural_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("100K");
        let chat = fs::read(fixture("tests/data/beam-mini/1/chat.json")).unwrap();
        for name in ["10", "2", "1", "plan-10", "plan-2"] {
            write(&root, &format!("{name}/chat.json"), &chat);
        }
        write(&root, "empty/readme.txt", b"not a conversation");
        let loaded = load_path(&root, &LoadOptions::default()).unwrap();
        let ids: Vec<&str> = loaded.conversations.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["beam-100K-1", "beam-100K-2", "beam-100K-10", "beam-100K-plan-2", "beam-100K-plan-10"]);
        assert_eq!(loaded.files.len(), 5, "no probing_questions.json in these copies");
    }

    #[test]
    fn natural_order() {
        let mut names = vec!["b", "10", "a2", "02", "1", "a10", "a", "2"];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(names, ["1", "02", "2", "10", "a", "a2", "a10", "b"]);
    }

    #[test]
    fn non_utf8_is_refused_with_its_place() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = b"[\n  {\"sample_id\": \"x".to_vec();
        bytes.push(0xff);
        bytes.extend_from_slice(b"\"}]");
        let path = write(tmp.path(), "latin1.json", &bytes);
        let text = err_text(load_path(&path, &LoadOptions::default()));
        assert!(text.contains("latin1.json"), "{text}");
        assert!(text.contains("byte offset 20 (line 2, column 19)"), "{text}");
        assert!(text.contains("not valid UTF-8"), "{text}");
    }

    #[test]
    fn broken_json_is_refused_with_line_and_column() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), "broken.json", b"[\n  {\"sample_id\": \"x\",,}\n]");
        let text = err_text(load_path(&path, &LoadOptions::default()));
        assert!(text.contains("broken.json"), "{text}");
        assert!(text.contains("line 2, column 21"), "{text}");
        assert!(text.contains("not JSON"), "{text}");
    }

    #[test]
    fn trailing_garbage_is_not_json() {
        let tmp = tempfile::tempdir().unwrap();
        let mut body = locomo_with_text("hi");
        body.push_str(" }");
        let path = write(tmp.path(), "trailing.json", body.as_bytes());
        let text = err_text(load_path(&path, &LoadOptions::default()));
        assert!(text.contains("trailing.json") && text.contains("not JSON"), "{text}");
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let body = format!("\u{feff}{}", locomo_with_text("hi"));
        let path = write(tmp.path(), "bom.json", body.as_bytes());
        let loaded = load_path(&path, &LoadOptions::default()).unwrap();
        assert_eq!(loaded.conversations[0].id, "t-1");
    }

    #[test]
    fn a_beam_conversation_has_one_id_however_it_is_named() {
        let mini = fixture("tests/data/beam-mini");
        let opts = LoadOptions::default();
        let ids = |path: &Path| -> Vec<String> {
            load_path(path, &opts).unwrap().conversations.into_iter().map(|c| c.id).collect()
        };
        assert_eq!(ids(&mini), ["beam-beam-mini-1"]);
        assert_eq!(ids(&mini.join("1")), ["beam-beam-mini-1"]);
        assert_eq!(ids(&mini.join("1/../1/.")), ["beam-beam-mini-1"]);
    }

    #[test]
    fn wrong_shape_names_the_json_path() {
        let tmp = tempfile::tempdir().unwrap();
        let body = locomo_with_text("hi").replace("\"text\":\"hi\"", "\"text\":42");
        let path = write(tmp.path(), "shape.json", body.as_bytes());
        let text = err_text(load_path(&path, &LoadOptions::default()));
        assert!(text.contains("shape.json"), "{text}");
        assert!(text.contains("[0].conversation.session_1[0].text"), "{text}");
        assert!(text.contains("wrong shape") && text.contains("expected a string"), "{text}");
    }

    #[test]
    fn a_turn_over_the_limit_is_refused_and_a_long_one_under_it_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let long = "x".repeat(350 * 1024);
        let ok = write(tmp.path(), "long.json", locomo_with_text(&long).as_bytes());
        let loaded = load_path(&ok, &LoadOptions::default()).unwrap();
        assert_eq!(loaded.conversations[0].sessions[0].turns[0].text.len(), 350 * 1024);

        let huge = "x".repeat(1024 * 1024);
        let bad = write(tmp.path(), "huge.json", locomo_with_text(&huge).as_bytes());
        let text = err_text(load_path(&bad, &LoadOptions::default()));
        assert!(text.contains("huge.json"), "{text}");
        assert!(text.contains("conversation `t-1`, turn `D1:1`"), "{text}");
        assert!(text.contains("1048576 bytes") && text.contains("524288"), "{text}");

        let strict = LoadOptions { max_turn_bytes: 1024 };
        let text = err_text(load_path(&ok, &strict));
        assert!(text.contains("358400 bytes, more than the limit of 1024"), "{text}");
    }

    #[test]
    fn the_demo_loads() {
        let loaded = load_demo().unwrap();
        assert_eq!(loaded.conversations.len(), 1);
        let demo = &loaded.conversations[0];
        assert_eq!(demo.id, "demo");
        assert_eq!(demo.format, SourceFormat::Locomo);
        assert_eq!(demo.sessions.len(), 3);
        assert_eq!(demo.turn_count(), 30);
        let speakers: std::collections::BTreeSet<&str> = demo.turns().map(|t| t.speaker.as_str()).collect();
        assert_eq!(speakers.len(), 2);
        let dates: std::collections::BTreeSet<_> = demo.sessions.iter().map(|s| s.date).collect();
        assert_eq!(dates.len(), 3, "three sessions on three dates");
        assert!(demo.sessions.iter().all(|s| s.date.is_some()));
        assert_eq!(demo.turns().filter(|t| t.image_caption.is_some()).count(), 1);
        assert_eq!(demo.questions.len(), 9);
        let mut categories: Vec<&str> = demo.questions.iter().map(|q| q.category.as_str()).collect();
        categories.sort_unstable();
        categories.dedup();
        assert_eq!(categories, ["1", "2", "4", "5"]);
        // "What breed is Maya's dog?" points at Tom's dog; "What is the capital of Australia?"
        // at nothing: the memory was never told.
        assert_eq!(demo.questions.iter().filter(|q| q.adversarial).count(), 2);
        assert!(demo.questions.iter().all(|q| !q.answer.is_empty()));
        assert!(demo.questions.iter().all(|q| q.evidence.is_empty() == q.text.contains("Australia")));
        assert_eq!((loaded.repaired_evidence, loaded.unresolved_evidence), (0, 0));
    }

    /// Loads the real public data when `MYELIN_DATASETS` points at it (the folder with
    /// `locomo/` and `beam/`); skipped otherwise, unless `MYELIN_REQUIRE_DATASETS=1` (CI).
    #[test]
    fn real_datasets() {
        let Some(root) = std::env::var_os("MYELIN_DATASETS").filter(|v| !v.is_empty()) else {
            let required = std::env::var("MYELIN_REQUIRE_DATASETS").is_ok_and(|v| v == "1");
            assert!(!required, "MYELIN_REQUIRE_DATASETS=1 but MYELIN_DATASETS is unset");
            println!("skipped: set MYELIN_DATASETS to the public data sets to load the real data");
            return;
        };
        let root = PathBuf::from(root);
        let opts = LoadOptions::default();

        let locomo = load_path(&root.join("locomo/locomo10-dev.json"), &opts).unwrap();
        assert_eq!(locomo.conversations.len(), 7);
        assert_eq!(locomo.question_count(), 1347);
        assert_eq!(locomo.turn_count(), 4124);
        // Repaired: "D8:6; D9:17" (two ids) and "D:11:26". Unresolved: "D10:19", "D", "D4:36".
        assert_eq!(locomo.repaired_evidence, 3);
        assert_eq!(locomo.unresolved_evidence, 3);
        let mut unresolved: Vec<(&str, &str)> = locomo
            .conversations
            .iter()
            .flat_map(|c| c.questions.iter())
            .flat_map(|q| q.unresolved_evidence.iter().map(move |u| (q.id.as_str(), u.as_str())))
            .collect();
        unresolved.sort_unstable();
        assert_eq!(unresolved.len(), 3, "{unresolved:?}");
        assert!(unresolved.iter().any(|(_, u)| *u == "D"), "{unresolved:?}");
        assert!(unresolved.iter().any(|(q, u)| q.starts_with("conv-42/") && *u == "D10:19"));

        let beam = load_path(&root.join("beam/100K"), &opts).unwrap();
        assert_eq!(beam.conversations.len(), 20);
        assert_eq!(beam.conversations[0].id, "beam-100K-1");
        assert_eq!(beam.conversations[19].id, "beam-100K-20");
        assert_eq!(beam.turn_count(), 5732);
        assert_eq!(beam.question_count(), 400);
        assert_eq!((beam.repaired_evidence, beam.unresolved_evidence), (0, 0));
        let questions: Vec<_> = beam.conversations.iter().flat_map(|c| c.questions.iter()).collect();
        for q in &questions {
            assert!(q.unresolved_evidence.is_empty(), "{}", q.id);
            assert_eq!(q.adversarial, q.category == "abstention", "{}", q.id);
        }
        assert_eq!(questions.iter().filter(|q| q.adversarial).count(), 40);
        // Every non-abstention question but five (whose source_chat_ids are empty lists)
        // has resolved evidence.
        let with_evidence = questions.iter().filter(|q| !q.evidence.is_empty());
        assert!(with_evidence.clone().all(|q| !q.adversarial));
        assert_eq!(with_evidence.count(), 355);
        assert!(beam.conversations.iter().all(|c| c.turns().all(|t| t.timestamp.is_some())));
    }
}
