//! Repository hygiene: every Rust file opens with a `//!` header saying what it owns.

use super::common::root;

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        let d = root().join(dir);
        if d.is_dir() {
            rust_files(&d, &mut files);
        }
    }
    assert!(files.len() >= 8, "found only {} Rust files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|p| !std::fs::read_to_string(p).expect("read").starts_with("//!"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a //! header: {missing:?}");
}
