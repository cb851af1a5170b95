//! `myelin check`: reads every part of a store and says which is damaged, where, and how to
//! recover; exits non-zero when one is.
//!
//! Owns the exit status. Must not read the store itself (`myelin::pipeline::check_store`
//! does) nor format the table (render does).

use myelin::config::Config;

use crate::cli::Globals;
use crate::cli::flags::CheckArgs;
use crate::cli::render;

pub fn run(args: CheckArgs, config: Config, g: &Globals) -> anyhow::Result<()> {
    let check = g.runtime.block_on(myelin::pipeline::check_store(&g.store, &config));
    render::check(&check, args.json)?;
    match check.damaged() {
        0 => Ok(()),
        n => anyhow::bail!(
            "{n} of {} parts of {} do not read whole. To recover: a conversation can be ingested again \
             (`myelin ingest` replaces it) and a serving scope deleted and added again; a store whose \
             manifest or datasets fail is restored from a backup",
            check.parts.len(),
            check.path.display()
        ),
    }
}
