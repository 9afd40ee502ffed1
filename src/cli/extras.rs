//! What a dispatch carries beside its request, as flags: priority, fairness key and weight,
//! and headers, each checked before anything connects.

use lintel::registry::fairness::Weight;
use lintel_client::DispatchOptions;
use lintel_wire::is_header_name;

/// How a dispatch shares a full pool (`dispatch`, `bench`).
#[derive(Debug, Clone, clap::Args)]
pub(super) struct FairnessArgs {
    /// Priority while waiting for a full pool: 1 (highest) to 5 (lowest) [node default: 3].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub(super) priority: Option<u8>,
    /// Fairness key whose share of a full pool the dispatch draws on; a node with grants
    /// takes the producer's grant's key instead.
    #[arg(long, value_name = "KEY", value_parser = fairness_key)]
    pub(super) fairness_key: Option<String>,
    /// The key's weight, e.g. 3 or 0.5, from 0.001 to 1000 [node default: 1]; counts only
    /// where the node allows weights.
    #[arg(long, value_name = "WEIGHT")]
    pub(super) fairness_weight: Option<Weight>,
}

impl FairnessArgs {
    /// `options` with the priority, key and weight given; none given leaves them as they are.
    pub(super) fn apply(&self, mut options: DispatchOptions) -> DispatchOptions {
        if let Some(priority) = self.priority {
            options = options.priority(priority);
        }
        if let Some(key) = &self.fairness_key {
            options = options.fairness_key(key.clone());
        }
        if let Some(Weight(thousandths)) = self.fairness_weight {
            options = options.fairness_weight(thousandths);
        }
        options
    }
}

/// A fairness key: any non-empty text (the node bounds its length).
pub(super) fn fairness_key(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("a fairness key is not empty".into());
    }
    Ok(text.to_owned())
}

/// Most keys `bench --fairness-keys` spreads its load over.
pub(super) const MAX_SPREAD: usize = 1_000;

/// Fairness keys to spread a load over, each with the weight it asks for, if any.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KeySpread(pub(super) Vec<(String, Option<Weight>)>);

/// `N` (the keys `k0` to `kN-1`) or a comma-separated list of `KEY[:WEIGHT]`.
pub(super) fn key_spread(text: &str) -> Result<KeySpread, String> {
    if let Ok(count) = text.parse::<usize>() {
        if !(1..=MAX_SPREAD).contains(&count) {
            return Err(format!("a count of keys is 1 to {MAX_SPREAD}"));
        }
        return Ok(KeySpread(
            (0..count).map(|i| (format!("k{i}"), None)).collect(),
        ));
    }
    let mut keys: Vec<(String, Option<Weight>)> = Vec::new();
    for entry in text.split(',') {
        let (key, weight) = match entry.rsplit_once(':') {
            Some((key, weight)) => (
                key,
                Some(weight.parse::<Weight>().map_err(|e| e.to_string())?),
            ),
            None => (entry, None),
        };
        let key = fairness_key(key)?;
        if keys.iter().any(|(seen, _)| *seen == key) {
            return Err(format!("key {key:?} is listed twice"));
        }
        keys.push((key, weight));
    }
    if keys.len() > MAX_SPREAD {
        return Err(format!("at most {MAX_SPREAD} keys"));
    }
    Ok(KeySpread(keys))
}

/// One `NAME=VALUE` header; the name is written lowercase, as it travels.
pub(super) fn header(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err("a header is NAME=VALUE, e.g. traceparent=00-...".into());
    };
    let name = name.trim().to_ascii_lowercase();
    if !is_header_name(&name) {
        return Err(format!(
            "header name {name:?} is not a token: letters, digits or !#$%&'*+-.^_`|~"
        ));
    }
    Ok((name, value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_a_name_and_a_value_split_at_the_first_equals_sign() {
        assert_eq!(
            header("TraceParent=00-ab=cd"),
            Ok(("traceparent".into(), "00-ab=cd".into()))
        );
        assert_eq!(header("empty="), Ok(("empty".into(), String::new())));
        for bad in ["novalue", "=value", "two words=x", "naïve=x"] {
            assert!(header(bad).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn a_spread_is_a_count_of_keys_or_a_list_with_weights() {
        let keys = |spread: KeySpread| spread.0;
        assert_eq!(
            key_spread("3").map(keys),
            Ok(vec![
                ("k0".into(), None),
                ("k1".into(), None),
                ("k2".into(), None)
            ])
        );
        assert_eq!(
            key_spread("gold:3,bronze").map(keys),
            Ok(vec![
                ("gold".into(), Some(Weight(3_000))),
                ("bronze".into(), None)
            ])
        );
        for bad in ["0", "a,,b", "a:0", "a:x", "a,a", "1001"] {
            assert!(key_spread(bad).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn a_fairness_key_is_not_empty() {
        assert!(fairness_key("").is_err());
        assert_eq!(fairness_key("tenant-a"), Ok("tenant-a".into()));
    }
}
