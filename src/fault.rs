//! Fault injection for the crash tests, in the manner of SQLite's and redb's: named points on
//! the store's write path (after each dataset's rows, before and after the manifest rename,
//! during compaction and purge) where the process kills itself with SIGKILL, as `kill -9`
//! would, once `MYELIN_FAULT_COUNTDOWN` points have passed. A test picks the countdown at
//! random and checks what a reopen finds.
//!
//! Compiled in only with the `testing` feature (a build without it has no fault points:
//! [`point`] does nothing), and inert unless the variable is set (one environment read per
//! process). Owns nothing else: must not change what any write does.

#[cfg(feature = "testing")]
use std::sync::OnceLock;
#[cfg(feature = "testing")]
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable: the number of fault points to pass before the process kills itself
/// (1: at the first). Unset, empty or 0: never.
#[cfg(feature = "testing")]
pub const COUNTDOWN_ENV: &str = "MYELIN_FAULT_COUNTDOWN";

#[cfg(feature = "testing")]
fn countdown() -> Option<&'static AtomicU64> {
    static LEFT: OnceLock<Option<AtomicU64>> = OnceLock::new();
    LEFT.get_or_init(|| {
        let n: u64 = std::env::var(COUNTDOWN_ENV).ok()?.trim().parse().ok()?;
        (n > 0).then(|| AtomicU64::new(n))
    })
    .as_ref()
}

/// A point where a write may be killed; `name` says where, for the log line a test reads.
#[cfg(feature = "testing")]
pub fn point(name: &str) {
    let Some(left) = countdown() else { return };
    if left.fetch_sub(1, Ordering::SeqCst) == 1 {
        eprintln!("fault: killed at {name}");
        kill_self();
    }
}

/// No fault points in a build without the `testing` feature.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub fn point(_name: &str) {}

#[cfg(all(unix, feature = "testing"))]
fn kill_self() -> ! {
    // SAFETY: sends a signal to this process; reads no memory of ours.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    std::process::abort()
}

#[cfg(all(not(unix), feature = "testing"))]
fn kill_self() -> ! {
    std::process::abort()
}
