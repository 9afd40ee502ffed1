//! One layering for every config key: defaults, then a TOML file, then `LINTEL_*` variables,
//! then flags, each later layer overriding the earlier ones key by key.
//!
//! The keys are the fields of [`NodeConfig`], found by serializing its defaults, so a new key
//! is layered without a line of its own here. A variable's text is read as the key's default
//! is shaped: a string as is, a list of strings comma-separated (or a TOML array), anything
//! else as a TOML value. Every value remembers where it came from, for errors and for
//! `lintel serve --print-config`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use super::node::{ConfigError, NodeConfig};

/// Prefix of every variable the node reads.
pub const ENV_PREFIX: &str = "LINTEL_";

/// `LINTEL_*` variables other commands and the tests read, which are not node keys.
const OTHER_VARIABLES: [&str; 5] = [
    "CONFIG",
    "CONNECT",
    "LOG_FORMAT",
    "THREADS",
    "TLS_SERVER_NAME",
];

/// Keys whose values are secrets, masked when printed.
const SECRETS: [&str; 2] = ["auth_token", "cluster_secret"];

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(String),
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(path) => write!(f, "file {path}"),
            Source::Env(name) => write!(f, "variable {name}"),
            Source::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// A config being layered: every key's value and where it came from.
#[derive(Debug, Clone)]
pub struct Layered {
    values: Map<String, Value>,
    sources: BTreeMap<String, Source>,
}

impl Layered {
    /// Every key at its default.
    ///
    /// # Errors
    /// [`ConfigError::Layer`] if the defaults cannot be represented, which is a bug.
    pub fn defaults() -> Result<Self, ConfigError> {
        let values = match serde_json::to_value(NodeConfig::default()) {
            Ok(Value::Object(values)) => values,
            _ => return Err(layer_error("defaults", &Source::Default, "not a table")),
        };
        let sources = values
            .keys()
            .map(|key| (key.clone(), Source::Default))
            .collect();
        Ok(Self { values, sources })
    }

    /// Lays the TOML file at `path` over what is there.
    ///
    /// # Errors
    /// [`ConfigError::Read`], [`ConfigError::Parse`], or [`ConfigError::Layer`] for a key the
    /// node does not know.
    pub fn file(mut self, path: &Path) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let table: toml::Table = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown.clone(),
            source,
        })?;
        let source = Source::File(shown);
        for (key, value) in table {
            let value = serde_json::to_value(value)
                .map_err(|err| layer_error(&key, &source, &err.to_string()))?;
            self.set(key, value, &source)?;
        }
        Ok(self)
    }

    /// Lays every `LINTEL_<KEY>` variable in `vars` over what is there.
    ///
    /// # Errors
    /// [`ConfigError::Layer`] naming a `LINTEL_*` variable that is no key, or a value that
    /// cannot be read as its key's type.
    pub fn env(
        mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        for (name, raw) in vars {
            let Some(suffix) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let source = Source::Env(name.clone());
            let key = suffix.to_ascii_lowercase();
            let Some(default) = self.values.get(&key).cloned() else {
                if OTHER_VARIABLES.contains(&suffix) || suffix.ends_with("_SEED") {
                    continue;
                }
                return Err(layer_error(&key, &source, "no such config key"));
            };
            let value =
                parse_text(&raw, &default).map_err(|reason| layer_error(&key, &source, &reason))?;
            self.set(key, value, &source)?;
        }
        Ok(self)
    }

    /// Lays the flags given on the command line over what is there; `flags` serializes to a
    /// table holding only the flags that were given.
    ///
    /// # Errors
    /// [`ConfigError::Layer`] for a flag that is no key.
    pub fn flags(mut self, flags: &impl serde::Serialize) -> Result<Self, ConfigError> {
        let Ok(Value::Object(given)) = serde_json::to_value(flags) else {
            return Err(layer_error(
                "flags",
                &Source::Flag(String::new()),
                "not a table",
            ));
        };
        for (key, value) in given {
            let source = Source::Flag(format!("--{}", key.replace('_', "-")));
            self.set(key, value, &source)?;
        }
        Ok(self)
    }

    fn set(&mut self, key: String, value: Value, source: &Source) -> Result<(), ConfigError> {
        if !self.values.contains_key(&key) {
            return Err(layer_error(&key, source, "no such config key"));
        }
        self.sources.insert(key.clone(), source.clone());
        self.values.insert(key, value);
        Ok(())
    }

    /// The config the layers make, checked.
    ///
    /// # Errors
    /// [`ConfigError::Layer`] naming the key whose value does not fit and where it came from,
    /// or what [`NodeConfig::validate`] finds.
    pub fn build(&self) -> Result<NodeConfig, ConfigError> {
        // Each key alone first, so a bad value is named with its source.
        for (key, value) in &self.values {
            let single = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
            if let Err(err) = serde_json::from_value::<NodeConfig>(single) {
                return Err(layer_error(key, self.source(key), &err.to_string()));
            }
        }
        let config: NodeConfig = serde_json::from_value(Value::Object(self.values.clone()))
            .map_err(|err| layer_error("config", &Source::Default, &err.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    fn source(&self, key: &str) -> &Source {
        self.sources.get(key).unwrap_or(&Source::Default)
    }

    /// Every key with its value and source, one per line, secrets masked.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (key, value) in &self.values {
            let shown = mask(key, value);
            let _ = writeln!(out, "{key} = {shown}  # {}", self.source(key));
        }
        out
    }
}

/// Reads a variable's text as its key's default is shaped.
fn parse_text(raw: &str, default: &Value) -> Result<Value, String> {
    match default {
        Value::String(_) | Value::Null => Ok(Value::String(raw.to_owned())),
        Value::Array(items)
            if !raw.trim_start().starts_with('[') && items.iter().all(|item| item.is_string()) =>
        {
            let items = raw
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect();
            Ok(Value::Array(items))
        }
        _ => {
            let kind = match default {
                Value::Bool(_) => "true or false",
                Value::Number(_) => "a number",
                Value::Array(_) => "a TOML array",
                _ => "a TOML value",
            };
            let table: toml::Table = toml::from_str(&format!("value = {raw}"))
                .map_err(|_| format!("cannot read {raw:?} as {kind}"))?;
            let value = table
                .get("value")
                .cloned()
                .unwrap_or(toml::Value::Boolean(false));
            serde_json::to_value(value).map_err(|err| err.to_string())
        }
    }
}

fn mask(key: &str, value: &Value) -> String {
    if SECRETS.contains(&key) && !value.is_null() {
        return "\"***\"".to_owned();
    }
    if key == "grants" {
        if let Value::Array(grants) = value {
            let masked: Vec<Value> = grants
                .iter()
                .map(|grant| {
                    let mut grant = grant.clone();
                    if let Some(token) = grant.get_mut("token").filter(|token| !token.is_null()) {
                        *token = Value::String("***".into());
                    }
                    grant
                })
                .collect();
            return Value::Array(masked).to_string();
        }
    }
    value.to_string()
}

fn layer_error(key: &str, source: &Source, reason: &str) -> ConfigError {
    ConfigError::Layer {
        key: key.to_owned(),
        from: source.to_string(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[derive(serde::Serialize, Default)]
    struct Flags {
        #[serde(skip_serializing_if = "Option::is_none")]
        max_connections: Option<usize>,
    }

    #[test]
    fn every_key_can_come_from_a_variable_read_as_its_type() {
        let layered = Layered::defaults()
            .unwrap()
            .env(vars(&[
                ("LINTEL_MAX_CONNECTIONS", "9"),
                ("LINTEL_PEERS", "127.0.0.1:1, 127.0.0.1:2"),
                ("LINTEL_AUTH_TOKEN", "s"),
                ("LINTEL_PLACEMENT", "weighted"),
                (
                    "LINTEL_GRANTS",
                    r#"[{ token = "t", roles = ["worker"], namespaces = ["a"] }]"#,
                ),
                ("LINTEL_LISTEN", "127.0.0.1:9000"),
                ("LINTEL_CONNECT", "ignored: another command's"),
                ("PATH", "/bin"),
            ]))
            .unwrap();
        let config = layered.build().unwrap();
        assert_eq!(config.max_connections, 9);
        assert_eq!(config.peers, ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(config.auth_token.as_deref(), Some("s"));
        assert_eq!(config.placement, crate::dispatch::Placement::Weighted);
        assert_eq!(config.grants.len(), 1);
        assert_eq!(config.listen.port(), 9000);
    }

    #[test]
    fn later_layers_win_and_each_value_names_its_source() {
        let flags = Flags {
            max_connections: Some(7),
        };
        let layered = Layered::defaults()
            .unwrap()
            .env(vars(&[
                ("LINTEL_MAX_CONNECTIONS", "9"),
                ("LINTEL_BACKLOG", "5"),
            ]))
            .unwrap()
            .flags(&flags)
            .unwrap();
        let config = layered.build().unwrap();
        assert_eq!((config.max_connections, config.backlog), (7, 5));
        let described = layered.describe();
        assert!(described.contains("max_connections = 7  # flag --max-connections"));
        assert!(described.contains("backlog = 5  # variable LINTEL_BACKLOG"));
        assert!(described.contains("node_id = \"\"  # default"));
    }

    #[test]
    fn unknown_variables_and_bad_values_name_the_key_and_the_source() {
        let unknown = Layered::defaults()
            .unwrap()
            .env(vars(&[("LINTEL_MAX_CONECTIONS", "9")]))
            .unwrap_err();
        assert!(
            unknown.to_string().contains("LINTEL_MAX_CONECTIONS"),
            "{unknown}"
        );
        let bad = Layered::defaults()
            .unwrap()
            .env(vars(&[("LINTEL_MAX_CONNECTIONS", "many")]))
            .and_then(|layered| layered.build())
            .unwrap_err();
        let shown = bad.to_string();
        assert!(
            shown.contains("max_connections") && shown.contains("LINTEL_MAX_CONNECTIONS"),
            "{shown}"
        );
    }

    #[test]
    fn secrets_are_masked_when_described() {
        let layered = Layered::defaults()
            .unwrap()
            .env(vars(&[
                ("LINTEL_AUTH_TOKEN", "hunter2"),
                (
                    "LINTEL_GRANTS",
                    r#"[{ token = "t0k", roles = ["worker"], namespaces = ["a"] }]"#,
                ),
            ]))
            .unwrap();
        let described = layered.describe();
        assert!(
            !described.contains("hunter2") && !described.contains("t0k"),
            "{described}"
        );
    }
}
