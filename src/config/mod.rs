//! Node configuration: defaults that work with no setup, then a TOML file, `LINTEL_*`
//! variables and flags, layered key by key in `layers`.

mod layers;
mod node;

pub use layers::{Layered, Source, ENV_PREFIX};
pub use node::{ConfigError, NodeConfig};
