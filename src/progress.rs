//! How long work shows its progress: [`Progress`], what the library's long operations (an
//! ingest, an evaluation, a benchmark) report to, and [`Silent`], which shows nothing. With
//! the `cli` feature, indicatif's `ProgressBar` is one (the binary draws the bars). Must not
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
