//! How long work shows its progress: [`Progress`], what the library's long operations (an
//! ingest, an evaluation, a benchmark) report to, and [`Silent`], which shows nothing. With
//! the `cli` feature, indicatif's `ProgressBar` is one (the binary draws the bars); and
//! [`Lap`], the milliseconds of each stage of one piece of work, for the debug log. Must not
//! draw or print by itself.

/// Where long work reports how far it got.
pub trait Progress: Sync {
    /// The work's total, in its own units.
    fn set_length(&self, total: u64);
    /// What it is on now.
    fn set_message(&self, message: String);
    /// `n` more units done.
    fn inc(&self, n: u64);
    /// A line for the user, above the progress.
    fn println(&self, line: String);
    /// Whether nothing is shown (work may skip preparing what it would report).
    fn is_hidden(&self) -> bool;
    /// The work is done: the progress goes away.
    fn finish_and_clear(&self);
}

/// Progress that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn set_length(&self, _total: u64) {}
    fn set_message(&self, _message: String) {}
    fn inc(&self, _n: u64) {}
    fn println(&self, _line: String) {}
    fn is_hidden(&self) -> bool {
        true
    }
    fn finish_and_clear(&self) {}
}

#[cfg(feature = "cli")]
impl Progress for indicatif::ProgressBar {
    fn set_length(&self, total: u64) {
        indicatif::ProgressBar::set_length(self, total);
    }
    fn set_message(&self, message: String) {
        indicatif::ProgressBar::set_message(self, message);
    }
    fn inc(&self, n: u64) {
        indicatif::ProgressBar::inc(self, n);
    }
    fn println(&self, line: String) {
        indicatif::ProgressBar::println(self, line);
    }
    fn is_hidden(&self) -> bool {
        indicatif::ProgressBar::is_hidden(self)
    }
    fn finish_and_clear(&self) {
        indicatif::ProgressBar::finish_and_clear(self);
    }
}

/// Milliseconds per stage of one piece of work, for the debug log (`Display`: `stage ms, …`).
#[derive(Debug)]
pub(crate) struct Lap {
    at: std::time::Instant,
    stages: Vec<(&'static str, f64)>,
}

impl Lap {
    /// Starts the first stage now.
    pub(crate) fn start() -> Lap {
        Lap { at: std::time::Instant::now(), stages: Vec::new() }
    }

    /// Ends the stage named `stage` now, and starts the next.
    pub(crate) fn mark(&mut self, stage: &'static str) {
        let now = std::time::Instant::now();
        self.stages.push((stage, (now - self.at).as_secs_f64() * 1e3));
        self.at = now;
    }
}

impl std::fmt::Display for Lap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (stage, ms)) in self.stages.iter().enumerate() {
            write!(f, "{}{stage} {ms:.1}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}
