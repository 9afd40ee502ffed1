//! Node configuration: [`NodeConfig`], every setting with a working default, and its checks.
//! Reading it from files, variables and flags is the `lintel` command's part.

mod node;

pub use node::{ConfigError, NodeConfig, PoolConfig};
