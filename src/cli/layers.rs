//! One layering for every config key: defaults, then a TOML file, then `LINTEL_*` variables,
//! then flags, each later layer overriding the earlier ones key by key.
//!
//! The keys are the fields of [`NodeConfig`], found by serializing its defaults, so a new key
//! is layered without a line of its own here. A variable's text is read as the key's default
//! is shaped: a string as is, a list of strings comma-separated (or a TOML array), anything
//! else as a TOML value. Every value remembers where it came from, for errors and for
//! `lintel serve --print-config`, which prints a TOML file that loads back.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use lintel::config::{ConfigError, NodeConfig};
use serde_json::{Map, Value};

/// Prefix of every variable the node reads.
const ENV_PREFIX: &str = "LINTEL_";

/// `LINTEL_*` variables other commands and the tests read, which are not node keys.
const OTHER_VARIABLES: [&str; 5] = [
    "CONFIG",
    "CONNECT",
    "LOG_FORMAT",
    "THREADS",
    "TLS_SERVER_NAME",
];

/// Prefix, after `LINTEL_`, of the client commands' own variables (`LINTEL_CLIENT_TLS_CA`...),
/// which `serve` leaves alone.
const CLIENT_PREFIX: &str = "CLIENT_";

/// Keys whose values are secrets, never printed.
const SECRETS: [&str; 3] = ["auth_token", "cluster_secret", "admin_token"];

/// Keys holding a socket address, which may be given as `host:port` and are resolved.
const ADDRESSES: [&str; 2] = ["listen", "admin_listen"];

/// The node's TLS keys, which client commands' variables were once named like.
const TLS_KEYS: [&str; 4] = ["tls_ca", "tls_cert", "tls_key", "tls_client_ca"];

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Source {
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

/// Why the layers do not make a config.
#[derive(Debug, thiserror::Error)]
pub(super) enum LayerError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: String,
        #[source]
        source: toml::de::Error,
    },
    /// A key the node does not know, or a value that does not fit its key.
    #[error("config key {key} (from {from}): {reason}")]
    Key {
        key: String,
        from: Source,
        reason: String,
    },
    /// The values fit their keys, but together they make no usable node.
    #[error("{config} (from {from}){hint}")]
    Invalid {
        config: ConfigError,
        from: Source,
        /// What the user most likely meant, or empty.
        hint: &'static str,
    },
}

/// A config being layered: every key's value and where it came from.
#[derive(Debug, Clone)]
pub(super) struct Layered {
    values: Map<String, Value>,
    sources: BTreeMap<String, Source>,
}

impl Layered {
    /// Every key at its default.
    ///
    /// # Errors
    /// [`LayerError::Key`] if the defaults cannot be represented, which is a bug.
    pub(super) fn defaults() -> Result<Self, LayerError> {
        let values = match serde_json::to_value(NodeConfig::default()) {
            Ok(Value::Object(values)) => values,
            _ => return Err(key_error("defaults", &Source::Default, "not a table")),
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
    /// [`LayerError::Read`], [`LayerError::Parse`], or [`LayerError::Key`] for a key the node
    /// does not know.
    pub(super) fn file(mut self, path: &Path) -> Result<Self, LayerError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LayerError::Read {
            path: shown.clone(),
            source,
        })?;
        let table: toml::Table = toml::from_str(&text).map_err(|source| LayerError::Parse {
            path: shown.clone(),
            source,
        })?;
        let source = Source::File(shown);
        for (key, value) in table {
            let value = serde_json::to_value(value)
                .map_err(|err| key_error(&key, &source, &err.to_string()))?;
            self.set(key, value, &source)?;
        }
        Ok(self)
    }

    /// Lays every `LINTEL_<KEY>` variable in `vars` over what is there.
    ///
    /// # Errors
    /// [`LayerError::Key`] naming a `LINTEL_*` variable that is no key, or a value that cannot
    /// be read as its key's type.
    pub(super) fn env(
        mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, LayerError> {
        for (name, raw) in vars {
            let Some(suffix) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if OTHER_VARIABLES.contains(&suffix)
                || suffix.starts_with(CLIENT_PREFIX)
                || suffix.ends_with("_SEED")
            {
                continue;
            }
            let source = Source::Env(name.clone());
            let key = suffix.to_ascii_lowercase();
            let Some(default) = self.values.get(&key).cloned() else {
                let reason = match self.nearest(&key) {
                    Some(near) => format!(
                        "no such config key; did you mean {ENV_PREFIX}{}?",
                        near.to_ascii_uppercase()
                    ),
                    None => "no such config key".to_owned(),
                };
                return Err(key_error(&key, &source, &reason));
            };
            let value =
                parse_text(&raw, &default).map_err(|reason| key_error(&key, &source, &reason))?;
            self.set(key, value, &source)?;
        }
        Ok(self)
    }

    /// Lays the flags given on the command line over what is there; `flags` serializes to a
    /// table holding only the flags that were given.
    ///
    /// # Errors
    /// [`LayerError::Key`] for a flag that is no key.
    pub(super) fn flags(mut self, flags: &impl serde::Serialize) -> Result<Self, LayerError> {
        let Ok(Value::Object(given)) = serde_json::to_value(flags) else {
            return Err(key_error(
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

    fn set(&mut self, key: String, value: Value, source: &Source) -> Result<(), LayerError> {
        if !self.values.contains_key(&key) {
            let reason = match self.nearest(&key) {
                Some(near) => format!("no such config key; did you mean {near}?"),
                None => "no such config key".to_owned(),
            };
            return Err(key_error(&key, source, &reason));
        }
        self.sources.insert(key.clone(), source.clone());
        self.values.insert(key, value);
        Ok(())
    }

    /// The known key most like `key`, when one is close enough to be a typo of it.
    fn nearest(&self, key: &str) -> Option<&str> {
        self.values
            .keys()
            .map(|known| (strsim::jaro_winkler(key, known), known))
            .filter(|(score, _)| *score >= 0.85)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, known)| known.as_str())
    }

    /// The config the layers make, checked.
    ///
    /// # Errors
    /// [`LayerError::Key`] naming the key whose value does not fit and where it came from, or
    /// [`LayerError::Invalid`] with what [`NodeConfig::validate`] finds.
    pub(super) fn build(&self) -> Result<NodeConfig, LayerError> {
        let mut values = self.values.clone();
        for key in ADDRESSES {
            if let Some(value) = values.get_mut(key) {
                resolve_address(value)
                    .map_err(|reason| key_error(key, self.source(key), &reason))?;
            }
        }
        // Each key alone first, so a bad value is named with its source.
        for (key, value) in &values {
            let single = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
            if let Err(err) = serde_json::from_value::<NodeConfig>(single) {
                return Err(key_error(key, self.source(key), &err.to_string()));
            }
        }
        let config: NodeConfig = serde_json::from_value(Value::Object(values))
            .map_err(|err| key_error("config", &Source::Default, &err.to_string()))?;
        config.validate().map_err(|err| self.invalid(err))?;
        Ok(config)
    }

    /// `err` with the source of the key it names, and a hint when that key came from a
    /// variable client commands once shared with the node.
    fn invalid(&self, err: ConfigError) -> LayerError {
        let key = match &err {
            ConfigError::Invalid { name, .. } => *name,
            ConfigError::Grants(_) => "grants",
            ConfigError::Fairness(_) => "fairness",
            ConfigError::Tls(_) => "tls_cert",
        };
        let from = self.source(key).clone();
        let hint = match &from {
            Source::Env(_) if TLS_KEYS.contains(&key) => {
                "; LINTEL_TLS_* variables set the node's own TLS: client commands read \
                 LINTEL_CLIENT_TLS_CA, LINTEL_CLIENT_TLS_CERT and LINTEL_CLIENT_TLS_KEY"
            }
            _ => "",
        };
        LayerError::Invalid {
            config: err,
            from,
            hint,
        }
    }

    fn source(&self, key: &str) -> &Source {
        self.sources.get(key).unwrap_or(&Source::Default)
    }

    /// Every key as a TOML file that loads back, with its source in a comment; unset keys and
    /// secrets are commented out, so loading the file never turns a placeholder into a value.
    pub(super) fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from(
            "# The effective config of `lintel serve`, each key with where its value came from.\n\
             # Load it back with `lintel serve --config FILE`: unset keys and secrets are\n\
             # commented out.\n",
        );
        for (key, value) in &self.values {
            let source = self.source(key);
            let line = match printable(key, value) {
                Ok(shown) => format!("{key} = {shown}"),
                Err(hidden) => format!("# {key} = {hidden}"),
            };
            let _ = writeln!(out, "{line}  # {source}");
        }
        out
    }
}

/// `value` as TOML, or why it is printed commented out.
fn printable(key: &str, value: &Value) -> Result<String, String> {
    if value.is_null() {
        return Err("(unset)".to_owned());
    }
    if SECRETS.contains(&key) {
        return Err("<set, hidden>".to_owned());
    }
    if let Value::Array(grants) = value {
        let with_tokens = grants
            .iter()
            .filter(|grant| grant.get("token").is_some_and(|token| !token.is_null()))
            .count();
        if key == "grants" && with_tokens > 0 {
            return Err(format!(
                "<{} set, hidden: {with_tokens} hold a token>",
                grants.len()
            ));
        }
    }
    toml::Value::try_from(value)
        .map(|toml| toml.to_string())
        .map_err(|err| format!("<cannot be printed as TOML: {err}>"))
}

/// Turns a `host:port` address into the `ip:port` text the key takes, preferring IPv4.
fn resolve_address(value: &mut Value) -> Result<(), String> {
    let Value::String(text) = value else {
        return Ok(());
    };
    if text.parse::<SocketAddr>().is_ok() {
        return Ok(());
    }
    let resolved: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|err| format!("{text:?} is not an address as host:port ({err})"))?
        .collect();
    let chosen = resolved
        .iter()
        .find(|addr| addr.is_ipv4())
        .or_else(|| resolved.first())
        .ok_or_else(|| format!("{text:?} resolves to no address"))?;
    *value = Value::String(chosen.to_string());
    Ok(())
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

fn key_error(key: &str, source: &Source, reason: &str) -> LayerError {
    LayerError::Key {
        key: key.to_owned(),
        from: source.clone(),
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
                ("LINTEL_CLIENT_TLS_CA", "ignored: the client commands'"),
                ("PATH", "/bin"),
            ]))
            .unwrap();
        let config = layered.build().unwrap();
        assert_eq!(config.max_connections, 9);
        assert_eq!(config.peers, ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(config.auth_token.as_deref(), Some("s"));
        assert_eq!(config.placement, lintel::dispatch::Placement::Weighted);
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
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("LINTEL_MAX_CONECTIONS")
                && unknown.contains("did you mean LINTEL_MAX_CONNECTIONS?"),
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
    fn secrets_are_never_printed() {
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
        assert!(described.contains("# auth_token = <set, hidden>  # variable LINTEL_AUTH_TOKEN"));
    }

    #[test]
    fn peers_and_their_resolve_interval_are_checked_and_named_with_their_source() {
        for (name, value, key) in [
            (
                "LINTEL_PEER_RESOLVE_INTERVAL_MS",
                "0",
                "peer_resolve_interval_ms",
            ),
            ("LINTEL_PEERS", "lintel-peers", "peers"),
        ] {
            let shown = Layered::defaults()
                .unwrap()
                .env(vars(&[(name, value)]))
                .and_then(|layered| layered.build())
                .unwrap_err()
                .to_string();
            assert!(shown.contains(key) && shown.contains(name), "{shown}");
        }
        let config = Layered::defaults()
            .unwrap()
            .env(vars(&[
                ("LINTEL_PEERS", "lintel-peers:7400"),
                ("LINTEL_PEER_RESOLVE_INTERVAL_MS", "250"),
            ]))
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.peers, ["lintel-peers:7400"]);
        assert_eq!(config.peer_resolve_interval_ms, 250);
    }

    #[test]
    fn a_host_name_is_resolved_for_an_address_key() {
        let layered = Layered::defaults()
            .unwrap()
            .env(vars(&[("LINTEL_LISTEN", "localhost:7411")]))
            .unwrap();
        let config = layered.build().unwrap();
        assert_eq!(config.listen.port(), 7411);
        assert!(config.listen.ip().is_loopback());
    }
}
