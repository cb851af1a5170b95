//! Where retrieval runs: the [`Backend`] a setting or flag asks for, the GPU's settings
//! ([`GpuConfig`]) and what an adapter is ([`AdapterDescription`]). Plain data in every build;
//! must not open a device.

use serde::{Deserialize, Serialize};

/// Set to make a missing GPU adapter an error in tests instead of a skip (CI sets it).
pub const REQUIRE_GPU_ENV: &str = "MYELIN_REQUIRE_GPU";

/// Where retrieval and embedding run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The GPU when there is a hardware adapter and the work is large enough for it to win.
    #[default]
    Auto,
    /// Always the CPU.
    Cpu,
    /// Always the GPU (a software renderer too); no usable adapter is an error.
    Gpu,
}

impl Backend {
    /// CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        }
    }
}

/// GPU settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    /// Where retrieval runs (default `auto`).
    pub backend: Backend,
    /// `auto` picks the GPU only when the largest graph has at least this many nodes
    /// (default 20,000; under it the CPU answers a query faster than one GPU round trip).
    pub min_nodes: usize,
    /// `auto` embeds a call of at least this many texts on the GPU, fewer on the CPU (default
    /// 8: not yet measured on a GPU; `myelin embed-bench --backend gpu` times both; `gpu`
    /// embeds every call there).
    pub embed_min_texts: usize,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig { backend: Backend::Auto, min_nodes: 20_000, embed_min_texts: 8 }
    }
}

/// What an adapter is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterDescription {
    /// Adapter name ("NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// Discrete, integrated, virtual, CPU or other.
    pub device_type: String,
    /// Graphics API.
    pub backend: String,
    /// Driver name and version.
    pub driver: String,
    /// A software renderer (Mesa's lavapipe, WARP, SwiftShader): correct but slow.
    pub software: bool,
}

impl std::fmt::Display for AdapterDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {}, {})", self.name, self.device_type, self.backend, self.driver)
    }
}
