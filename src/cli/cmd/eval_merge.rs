//! `myelin eval-merge`: read the parts of an evaluation run in shards (`eval --shard I/N
//! --json`), join them into the run of the whole, and show and write its report as `eval`
//! does in one process.
//!
//! Owns the command's steps. Must not check or join parts (`myelin::eval::shard` does),
//! compute a figure (`myelin::eval` does) nor format a table (render does).

use std::time::Instant;

use myelin::eval::shard::{Part, merge};

use super::eval::write_report;
use crate::cli::flags::EvalMergeArgs;
use crate::cli::render;

pub fn run(args: EvalMergeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let parts =
        args.parts.iter().map(|path| Ok((path.clone(), Part::read(path)?))).collect::<myelin::Result<Vec<_>>>()?;
    let run = merge(&parts)?;
    let report = run.report(args.files.per_question.is_some())?;
    render::eval_notes(&report);
    render::eval_report(&report);
    write_report(&report, &args.files)?;
    eprintln!(
        "merged {} shards: {} conversations, {} questions, in {:.1} s",
        parts.len(),
        report.conversations.len(),
        report.questions + report.calibration_questions,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
