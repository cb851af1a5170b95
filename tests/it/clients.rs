//! Clients nobody here wrote, unchanged, against the real binary on loopback: mem0's own Python
//! client (`mem0ai`, both generations: 2.x on the v3 routes, 0.1.x on v1/v2) drives every call
//! of `MemoryClient` against `myelin serve` with a token, and asserts on the answers
//! (`tests/clients/mem0_client.py`); the official MCP Python SDK's stdio client drives every
//! tool of `myelin mcp`, concurrent calls, the cancellation of a long add and bad input
//! (`tests/clients/mcp_client.py`). The clients come from the environment
//! `scripts/python-clients.sh` makes (`$MYELIN_PYTHON`), one folder per mem0ai version.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{bin, python, root};
use crate::serve::Server;

/// The mem0ai versions installed beside `python`'s environment (`<venv>/mem0ai/<version>`).
fn mem0_versions(python: &Path) -> Vec<(String, PathBuf)> {
    let dir = python.parent().and_then(Path::parent).expect("python in <venv>/bin").join("mem0ai");
    let mut versions: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/python-clients.sh)", dir.display()))
        .map(|e| e.expect("entry").path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    versions.sort();
    versions
}

#[test]
fn mem0s_own_client_works_unchanged_in_both_generations() {
    let Some(python) = python() else { return };
    let versions = mem0_versions(&python);
    // Both generations, whose routes differ.
    assert!(versions.iter().any(|(v, _)| v.starts_with("0.")), "{versions:?}");
    assert!(versions.iter().any(|(v, _)| !v.starts_with("0.")), "{versions:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "k-3f9a\n").expect("token file");
    let server = Server::start(&dir.path().join("store"), &["--token-file", token.to_str().unwrap()]);
    for (version, path) in &versions {
        let out = Command::new(&python)
            .current_dir(root())
            .arg("tests/clients/mem0_client.py")
            .args(["--host", &format!("http://{}", server.addr), "--api-key", "k-3f9a"])
            .env("PYTHONPATH", path)
            .env("MEM0_TELEMETRY", "False")
            .output()
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "mem0ai {version}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("mem0ai {version}: ")) && stdout.contains("checks passed"), "{stdout}");
    }
}

#[test]
fn the_official_mcp_sdk_drives_every_tool_concurrently_and_cancels() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(&python)
        .current_dir(root())
        .arg("tests/clients/mcp_client.py")
        .arg("--myelin")
        .arg(bin())
        .arg("--store")
        .arg(dir.path().join("store"))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("mcp SDK: ") && stdout.contains("checks passed"), "{stdout}");
}
