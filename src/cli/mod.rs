//! The binary's modules (not part of the library): [`flags`] parses the command line,
//! [`cmd`] holds one module per subcommand, [`render`] prints what they return.
//!
//! Owns what every subcommand is handed ([`Globals`]). Must not hold library logic: a rule the
//! library's users would need belongs in `myelin`.

pub mod cmd;
pub mod flags;
pub mod render;

use myelin::store::Location;

/// What the global flags and `main` give every subcommand.
pub struct Globals {
    /// The store (`--store`, `$MYELIN_STORE`, `./myelin-store`): a directory or an object
    /// store's URI.
    pub store: Location,
    /// No progress bars (`--quiet`).
    pub quiet: bool,
    /// The async runtime the subcommand blocks on.
    pub runtime: tokio::runtime::Runtime,
}
