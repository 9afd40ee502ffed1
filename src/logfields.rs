//! Log fields that hold lists: written as JSON arrays of strings, which text logs show as they
//! are and `lintel --log-format json` keeps as arrays.
//!
//! A field is read as a list by its name, [`LIST_FIELDS`]: the `tracing` fields a formatter
//! sees carry no type, and `valuable`, which would carry one, needs `--cfg tracing_unstable`
//! in every build of the binary.

use std::fmt;

/// The names of the fields the node logs as a [`List`].
pub const LIST_FIELDS: [&str; 5] = ["namespaces", "activities", "added", "removed", "kept"];

/// A list of items, shown as a JSON array of their texts: `["demo","billing"]`.
#[derive(Debug, Clone, Copy)]
pub struct List<'a, T>(pub &'a [T]);

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        let json = serde_json::to_string(&texts).map_err(|_| fmt::Error)?;
        f.write_str(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::List;

    #[test]
    fn a_list_is_a_json_array_of_its_texts() {
        let names = ["demo".to_owned(), "quote\"d".to_owned()];
        assert_eq!(List(&names).to_string(), r#"["demo","quote\"d"]"#);
        assert_eq!(List::<u8>(&[]).to_string(), "[]");
    }
}
