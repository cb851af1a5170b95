//! Everything the binary shows: the tables, summary lines and JSON documents of each
//! subcommand's report, and the progress bars. One module, by kind of report: [`store`]
//! (ingest, stats, prepare notes), [`answer`] (query, demo), [`eval`] (evaluation, GNN card),
//! [`bench`] (every benchmark and the load generator); the house style is here.
//!
//! Owns the look of the output (columns, digits, wording) and nothing else. Must not compute a
//! figure the report does not hold, read the store or the input, or write a file.

mod answer;
mod bench;
mod eval;
mod store;

use std::io::IsTerminal;

use anyhow::Context;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};

pub use answer::{Answer, Shown, answer, demo_answer};
pub use bench::{
    IndexBench, bench_summary, embed_bench, goals, index_bench, index_bench_json, load, scale_history, write_bench,
};
pub use eval::{
    card, eval_gate_plot, eval_notes, eval_plot, eval_report, gate_plot, gate_reliability_plot, gate_training,
};
pub use store::{check, ingest, prepare_step, stats};

/// A new table in the house style.
fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t
}

/// Pretty JSON of `value` on stdout.
pub fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A progress bar on a terminal, counting `unit`; hidden otherwise.
pub fn progress_bar(quiet: bool, unit: &str) -> anyhow::Result<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let pb = ProgressBar::new(0);
    let template = format!("{{spinner}} {{msg:>14}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}");
    pb.set_style(ProgressStyle::with_template(&template).context("progress template")?.progress_chars("=> "));
    Ok(pb)
}
