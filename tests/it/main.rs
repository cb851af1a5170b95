//! The one integration-test binary (one binary keeps link time down on 2 cores). Each module
//! drives the real `myelin` binary or the library on real weights and real or fixture data.
//! They need the `testing` feature (fault points, GPU test hooks): `scripts/test.sh` turns it on.

#[cfg(not(feature = "testing"))]
compile_error!(
    "the integration tests need the `testing` feature: run scripts/test.sh, or cargo test --features testing"
);

mod archive;
mod cli;
mod clients;
mod common;
mod crash;
mod embed_golden;
mod faults;
mod fuzz;
mod gate;
mod gnn;
mod gpu;
mod peer;
mod retrieve;
mod s3;
mod scale;
mod serve;
mod shard;
mod tidy;
