//! The GPU backend: where retrieval runs (`config.rs`: [`Backend`], [`GpuConfig`]), what a
//! ranking batch asks and returns (`request`, plain data in every build), and, with the `gpu`
//! feature, one device (`device.rs`: `Gpu`), the shader registry, the graphs it holds
//! (`corpus`), the batched ranking step (`ranker`), the models' forward passes (`bert`:
//! all-MiniLM-L6-v2; `sage`: the learned relevance) and single-kernel runners for parity tests
//! and benchmarks (`kernels`). Without the feature, `dummy.rs` stands in: the same types, none
//! of which can exist, so opening a device says the build has none.
//!
//! This file only names what its files define. Owns everything wgpu. Must not decide what to
//! rank or how to read the result: `retrieve` prepares the queries and turns ranked nodes into
//! episodes, exactly as on the CPU.

mod config;
// Its GPU-side structs and flags are read by the device code only.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) mod layout;
pub mod request;

pub use config::{AdapterDescription, Backend, GpuConfig, REQUIRE_GPU_ENV};

#[cfg(feature = "gpu")]
pub mod bert;
#[cfg(feature = "gpu")]
pub mod corpus;
#[cfg(feature = "gpu")]
mod device;
#[cfg(feature = "gpu")]
pub mod kernels;
#[cfg(feature = "gpu")]
pub mod ranker;
#[cfg(feature = "gpu")]
pub(crate) mod registry;
#[cfg(feature = "gpu")]
pub mod sage;
#[cfg(all(feature = "gpu", any(test, feature = "testing")))]
pub use device::test_gpu;
#[cfg(feature = "gpu")]
pub use device::{ErrorScopes, Gpu, grid};

#[cfg(not(feature = "gpu"))]
mod dummy;
#[cfg(not(feature = "gpu"))]
pub use dummy::Gpu;
/// The graphs resident on a GPU: none in a build without the `gpu` feature.
#[cfg(not(feature = "gpu"))]
pub mod corpus {
    pub use super::dummy::Corpus;
    pub use super::request::GraphInput;
}
/// The GPU ranking step: none in a build without the `gpu` feature.
#[cfg(not(feature = "gpu"))]
pub mod ranker {
    pub use super::dummy::Ranker;
    pub use super::request::{BatchTiming, RankQuery, RankSettings, Ranked, RankedHit, Stage};
}
