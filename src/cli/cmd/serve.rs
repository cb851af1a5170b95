//! `myelin serve`: the serving API over HTTP until Ctrl-C or SIGTERM, then the requests in
//! flight are finished and it exits 0.
//!
//! Owns opening the service (writer or read-only follower; also `myelin mcp`'s), the bearer
//! token file (also `myelin load`'s), the listener and the shutdown signal. Must not answer a
//! route itself (`myelin::serve::http` does).

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use myelin::config::Config;
use myelin::serve::Service;
use myelin::store::Location;

use crate::cli::Globals;
use crate::cli::flags::ServeArgs;

pub fn run(args: ServeArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    args.serving.apply(&mut config)?;
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let addr = args.addr;
    g.runtime.block_on(async {
        let service = open_service(&g.store, config, args.read_only).await?;
        eprintln!("search {}", service.backend());
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
        println!("listening on http://{}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let router = myelin::serve::http::router(service, token, args.max_body_bytes);
        let shutdown = shutdown_signal()?;
        myelin::serve::http::serve(listener, router, shutdown).await?;
        anyhow::Ok(())
    })
}

/// The serving API over `store`: its one writer, or a reader that follows the writer's commits.
pub async fn open_service(store: &Location, config: Config, read_only: bool) -> myelin::Result<Service> {
    if read_only { Service::open_read_only(store, config).await } else { Service::open(store, config).await }
}

/// The bearer token in `path` (surrounding whitespace dropped; empty is an error).
pub fn read_token(path: &Path) -> anyhow::Result<String> {
    let t = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let t = t.trim().to_string();
    anyhow::ensure!(!t.is_empty(), "{}: empty token", path.display());
    Ok(t)
}

/// Completes on Ctrl-C or SIGTERM: the server then stops taking connections, finishes the
/// requests in flight (their writes commit or fail whole) and exits 0.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("listening for SIGTERM")?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("stopping: finishing the requests in flight");
    })
}
