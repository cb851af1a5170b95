//! Helpers shared by the integration tests: running the binary, temporary stores, and the
//! data-set directory from `$MYELIN_DATASETS`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the built `myelin` binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_myelin"))
}

/// The repository root (where `models/` and `datasets/` live).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `myelin` with `args` from the repository root; the store is always given explicitly.
pub fn myelin(store: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(root())
        .arg("--quiet")
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("MYELIN_STORE")
        .env_remove("MYELIN_CONFIG")
        .output()
        .expect("the myelin binary runs")
}

/// Runs `myelin` and requires success; returns stdout.
pub fn ok(store: &Path, args: &[&str]) -> String {
    let out = myelin(store, args);
    assert!(
        out.status.success(),
        "myelin {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs `myelin` and requires failure; returns stderr.
pub fn fails(store: &Path, args: &[&str]) -> String {
    let out = myelin(store, args);
    assert!(!out.status.success(), "myelin {args:?} should fail but printed {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).expect("utf-8 error")
}

/// `stats --json` parsed.
pub fn stats(store: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(store, &["stats", "--json"])).expect("stats --json is JSON")
}

/// The path in `$var`, or `None` (with a note saying what it is for) when it is unset; `$require`
/// set to `1` (CI) turns a missing one into a failure. `is` checks what the path must be.
fn required_path(var: &str, require: &str, what: &str, is: fn(&Path) -> bool) -> Option<PathBuf> {
    let required = std::env::var(require).is_ok_and(|v| v == "1");
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(is(&path), "{var}={} is not {what}", path.display());
            Some(path)
        }
        None => {
            assert!(!required, "{require}=1 but {var} is unset");
            eprintln!("skipped: set {var} to {what} to run this test");
            None
        }
    }
}

/// The public data sets, or `None` (with a note) when `$MYELIN_DATASETS` is unset. CI sets
/// `MYELIN_REQUIRE_DATASETS=1`, which turns a missing directory into a failure.
pub fn datasets() -> Option<PathBuf> {
    required_path("MYELIN_DATASETS", "MYELIN_REQUIRE_DATASETS", "the public data sets' directory", Path::is_dir)
}

/// A JSON file the binary wrote, parsed (a missing or malformed file fails naming it).
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).expect("json")
}

/// The Python of the clients' environment (`scripts/python-clients.sh`: LanceDB, mem0ai, the
/// MCP SDK, pinned), or `None` (with a note) when `$MYELIN_PYTHON` is unset. CI sets
/// `MYELIN_REQUIRE_PYTHON=1`, which turns a missing interpreter into a failure.
pub fn python() -> Option<PathBuf> {
    required_path(
        "MYELIN_PYTHON",
        "MYELIN_REQUIRE_PYTHON",
        "the clients' Python (scripts/python-clients.sh)",
        Path::is_file,
    )
}
