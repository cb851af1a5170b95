//! [`BlockingService`]: the [`Service`] for callers without an async runtime, on a runtime of
//! its own. Must hold no logic of its own beyond waiting.

use super::api::*;
use super::filter::Filter;
use super::service::*;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::store::{HistoryEvent, Location};

/// The [`Service`] for scripts and synchronous code: the same operations, each blocking on a
/// runtime of its own. Not for use inside an async runtime (use [`Service`] there). Dropping
/// it waits for its writer to let go of the store ([`Service::close`]).
#[derive(Debug)]
pub struct BlockingService {
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) service: Service,
}

impl Drop for BlockingService {
    fn drop(&mut self) {
        if let Some(task) = self.service.let_go() {
            let _ = self.runtime.block_on(task);
        }
    }
}

impl BlockingService {
    /// [`Service::open`].
    pub fn open(root: impl Into<Location>, config: Config) -> Result<BlockingService> {
        BlockingService::start(Service::open(root, config))
    }

    /// [`Service::open_read_only`].
    pub fn open_read_only(root: impl Into<Location>, config: Config) -> Result<BlockingService> {
        BlockingService::start(Service::open_read_only(root, config))
    }

    /// The service `opening` gives, on a runtime of its own.
    fn start(opening: impl std::future::Future<Output = Result<Service>>) -> Result<BlockingService> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("<tokio runtime>", e))?;
        let service = runtime.block_on(opening)?;
        Ok(BlockingService { runtime, service })
    }

    /// The async handle, to share with async code.
    pub fn service(&self) -> &Service {
        &self.service
    }

    /// [`Service::add`].
    pub fn add(&self, scope: &Scope, messages: Vec<Message>) -> Result<Vec<MemoryItem>> {
        self.runtime.block_on(self.service.add(scope, messages))
    }

    /// [`Service::search`].
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResult> {
        self.runtime.block_on(self.service.search(request))
    }

    /// [`Service::search_batch`].
    pub fn search_batch(&self, requests: &[SearchRequest]) -> Vec<Result<SearchResult>> {
        self.runtime.block_on(self.service.search_batch(requests))
    }

    /// [`Service::update`].
    pub fn update(&self, id: &str, edit: Edit) -> Result<MemoryItem> {
        self.runtime.block_on(self.service.update(id, edit))
    }

    /// [`Service::get`].
    pub fn get(&self, id: &str) -> Result<MemoryItem> {
        self.runtime.block_on(self.service.get(id))
    }

    /// [`Service::get_all`].
    pub fn get_all(&self, scope: &Scope, page: Page) -> Result<Vec<MemoryItem>> {
        self.runtime.block_on(self.service.get_all(scope, page))
    }

    /// [`Service::list`].
    pub fn list(&self, scope: &Scope, filters: Option<&Filter>, page: Page) -> Result<(usize, Vec<MemoryItem>)> {
        self.runtime.block_on(self.service.list(scope, filters, page))
    }

    /// [`Service::delete`].
    pub fn delete(&self, id: &str) -> Result<()> {
        self.runtime.block_on(self.service.delete(id))
    }

    /// [`Service::delete_all`].
    pub fn delete_all(&self, scope: &Scope) -> Result<usize> {
        self.runtime.block_on(self.service.delete_all(scope))
    }

    /// [`Service::history`].
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEvent>> {
        self.runtime.block_on(self.service.history(id))
    }
}
