//! The writer's lease on a store on an object store, where no `flock` reaches across
//! machines: the object `.myelin.lease` names its holder and when the lease runs out. A writer
//! takes it with a conditional put (create where there is none; replace, on the version it
//! read, one that has run out), renews it from a thread of its own every third of its term,
//! and gives it back (a conditional put of a lease that has run out) when its last handle
//! goes. A holder that dies leaves a lease that runs out: the next writer takes it then.
//!
//! What makes one writer safe without trusting clocks alone: a holder counts its own lease as
//! good only until a quarter term before the time it wrote ([`Lease::check`], before every
//! commit), and a commit is itself a conditional put of `myelin.json` on the version its
//! transaction read, so a writer that stalled past its lease cannot overwrite its
//! successor's commit. It must not read or write anything but the lease object.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use object_store::{PutMode, UpdateVersion};
use serde::{Deserialize, Serialize};

use super::location::{Location, Remote};
use super::manifest::LEASE_FILE;
use crate::error::{Error, Result};

/// Environment variable setting a lease's term in milliseconds (default [`LEASE_MS`]).
pub const LEASE_ENV: &str = "MYELIN_LEASE_MS";
/// A lease's default term: a writer that died is replaced this long after its last renewal.
pub const LEASE_MS: u64 = 10_000;

/// What the lease object holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseDoc {
    /// Who holds it: pid, command line, host, since when.
    holder: String,
    /// This holding, told apart from a later one by the same process.
    token: String,
    renewed_at: DateTime<Utc>,
    /// When another writer may take it, by the holder's clock.
    expires_at: DateTime<Utc>,
}

/// A lease held: renewed by its thread until dropped.
pub(super) struct Lease {
    shared: Arc<Shared>,
    /// Told when the renewer has given the lease back and stopped.
    done: Mutex<std::sync::mpsc::Receiver<()>>,
}

struct Shared {
    remote: Arc<Remote>,
    root: Location,
    doc: LeaseDoc,
    term: Duration,
    state: Mutex<Held>,
    stop: (Mutex<bool>, Condvar),
}

struct Held {
    version: UpdateVersion,
    /// Until when this holder may commit: a quarter term short of what it wrote.
    good_until: Instant,
    /// Why it is lost for good (taken by another writer after it lapsed).
    lost: Option<String>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("holder", &self.shared.doc.holder).field("term", &self.shared.term).finish()
    }
}

/// The lease's term: `$MYELIN_LEASE_MS`, else [`LEASE_MS`].
fn term() -> Result<Duration> {
    let ms = match std::env::var(LEASE_ENV) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse::<u64>().ok().filter(|&ms| ms >= 100).ok_or_else(|| {
            Error::InvalidArgument(format!("{LEASE_ENV}={v}: a lease's term in milliseconds, at least 100"))
        })?,
        _ => LEASE_MS,
    };
    Ok(Duration::from_millis(ms))
}

impl LeaseDoc {
    fn renewed(&self, term: Duration) -> LeaseDoc {
        let now = Utc::now();
        LeaseDoc { renewed_at: now, expires_at: now + term, ..self.clone() }
    }

    fn bytes(&self) -> Vec<u8> {
        // A struct of strings and times always encodes.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

impl Lease {
    /// Takes `root`'s lease, or fails with [`Error::Locked`] naming the holder of one that has
    /// not run out.
    pub(super) async fn take(root: &Location, remote: &Arc<Remote>, holder: String) -> Result<Lease> {
        let term = term()?;
        let token = format!("{:032x}", rand::random::<u128>());
        let doc = LeaseDoc { holder, token, renewed_at: Utc::now(), expires_at: Utc::now() };
        // Another writer taking it between our read and our put makes the put fail: look again.
        for _ in 0..4 {
            let mode = match remote.get(LEASE_FILE).await? {
                None => PutMode::Create,
                Some((bytes, version)) => {
                    let held: LeaseDoc = serde_json::from_slice(&bytes).map_err(|e| Error::Locked {
                        path: root.to_path_buf(),
                        holder: format!("an unreadable lease {LEASE_FILE} ({e}); remove it if no writer runs"),
                    })?;
                    if held.expires_at > Utc::now() {
                        return Err(Error::Locked {
                            path: root.to_path_buf(),
                            holder: format!(
                                "{}; its lease was renewed at {} and runs to {} (a writer that died is replaced once \
                                 it runs out)",
                                held.holder,
                                held.renewed_at.to_rfc3339(),
                                held.expires_at.to_rfc3339()
                            ),
                        });
                    }
                    tracing::warn!(
                        "{root}: taking over the lease of {}, which ran out at {}",
                        held.holder,
                        held.expires_at
                    );
                    PutMode::Update(version)
                }
            };
            let sent = Instant::now();
            let ours = doc.renewed(term);
            if let Ok(version) = remote.put(LEASE_FILE, ours.bytes(), mode).await? {
                return Ok(Lease::hold(root, remote, ours, term, version, sent));
            }
        }
        Err(Error::Locked { path: root.to_path_buf(), holder: "other writers taking its lease at this moment".into() })
    }

    fn hold(
        root: &Location,
        remote: &Arc<Remote>,
        doc: LeaseDoc,
        term: Duration,
        version: UpdateVersion,
        sent: Instant,
    ) -> Lease {
        let shared = Arc::new(Shared {
            remote: remote.clone(),
            root: root.clone(),
            doc,
            term,
            state: Mutex::new(Held { version, good_until: sent + term * 3 / 4, lost: None }),
            stop: (Mutex::new(false), Condvar::new()),
        });
        let (tell, done) = std::sync::mpsc::channel();
        let renewer = shared.clone();
        let spawned = std::thread::Builder::new().name("myelin-lease".into()).spawn(move || {
            renewer.renew();
            let _ = tell.send(());
        });
        if let Err(e) = spawned {
            // Without a renewer the lease still serves until it runs out; commits then fail.
            tracing::error!("{root}: cannot start the lease's renewer: {e}");
        }
        Lease { shared, done: Mutex::new(done) }
    }

    /// Whether this holder may still commit: its lease neither taken nor run out.
    pub(super) fn check(&self) -> Result<()> {
        let held = self.shared.state.lock().map_err(|_| self.shared.gone("its renewer panicked"))?;
        if let Some(why) = &held.lost {
            return Err(self.shared.gone(why));
        }
        if Instant::now() >= held.good_until {
            return Err(self.shared.gone("it was not renewed in time (the object store did not answer)"));
        }
        Ok(())
    }
}

impl Shared {
    fn gone(&self, why: &str) -> Error {
        Error::Store {
            path: self.root.to_path_buf(),
            message: format!("this writer's lease is lost: {why}; nothing more is committed by it"),
        }
    }

    /// The renewer: every third of a term, the lease put again on the version it holds.
    fn renew(&self) {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("{}: the lease's renewer has no runtime: {e}", self.root);
                return;
            }
        };
        let (stop, wake) = &self.stop;
        loop {
            let Ok(stopped) = stop.lock() else { return };
            let Ok((stopped, _)) = wake.wait_timeout_while(stopped, self.term / 3, |s| !*s) else { return };
            let stopping = *stopped;
            drop(stopped);
            let Ok(version) = self.state.lock().map(|h| h.version.clone()) else { return };
            let sent = Instant::now();
            let doc = if stopping {
                // Given back: run out now, so the next writer need not wait.
                LeaseDoc { expires_at: Utc::now(), ..self.doc.renewed(self.term) }
            } else {
                self.doc.renewed(self.term)
            };
            let put = runtime.block_on(self.remote.put(LEASE_FILE, doc.bytes(), PutMode::Update(version)));
            let Ok(mut held) = self.state.lock() else { return };
            match put {
                Ok(Ok(version)) => {
                    held.version = version;
                    held.good_until = sent + self.term * 3 / 4;
                }
                Ok(Err(_)) => {
                    tracing::error!("{}: this writer's lease was taken by another writer", self.root);
                    held.lost = Some("another writer took it after it ran out".into());
                    return;
                }
                Err(e) => tracing::warn!("{}: renewing the writer's lease: {e}", self.root),
            }
            if stopping {
                return;
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let (stop, wake) = &self.shared.stop;
        if let Ok(mut s) = stop.lock() {
            *s = true;
            wake.notify_all();
        }
        // Wait a little for the lease to be given back; it runs out by itself otherwise.
        if let Ok(done) = self.done.lock() {
            let _ = done.recv_timeout(Duration::from_secs(5));
        }
    }
}
