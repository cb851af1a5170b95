//! `myelin mcp`: the serving API to agent clients over the Model Context Protocol on stdio.
//!
//! Owns applying its flags and opening the service. Must not speak the protocol itself
//! (`myelin::serve::mcp` does) nor write to stdout, which is the protocol's.

use myelin::config::Config;
use myelin::serve::Scope;
use myelin::serve::mcp::Mcp;

use super::serve::open_service;
use crate::cli::Globals;
use crate::cli::flags::McpArgs;

pub fn run(args: McpArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    args.serving.apply(&mut config)?;
    g.runtime.block_on(async {
        let service = open_service(&g.store, config, args.read_only).await?;
        let scope = Scope { user_id: args.user_id, agent_id: args.agent_id, run_id: args.run_id };
        if scope != Scope::default() {
            scope.key()?; // a bad default scope is an error now, not at the first call
        }
        myelin::serve::mcp::run(Mcp::new(service, scope)).await
    })?;
    Ok(())
}
