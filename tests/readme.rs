//! The README's configuration example is a config the node accepts, key for key.

use lintel::NodeConfig;

#[test]
fn the_readme_config_example_is_a_valid_node_config() {
    let readme = include_str!("../README.md");
    let start = readme
        .find("```toml\n")
        .expect("the README has a toml example")
        + "```toml\n".len();
    let length = readme[start..].find("```").expect("the toml example ends");
    let config: NodeConfig =
        toml::from_str(&readme[start..start + length]).expect("the example parses, key for key");
    config.validate().expect("the example is a usable config");
    assert!(!config.grants.is_empty() && !config.peers.is_empty());
}
