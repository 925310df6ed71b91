//! Zone and template names: `[a-z0-9][a-z0-9-]{0,62}`, checked before anything touches disk.

use crate::error::{Error, Result};

/// The longest name allowed (a hostname label is at most 63 bytes).
pub const MAX_LEN: usize = 63;

/// Why `name` is not a valid name, or `None` if it is.
pub fn problem(name: &str) -> Option<&'static str> {
    let bytes = name.as_bytes();
    let Some(&first) = bytes.first() else {
        return Some("it is empty");
    };
    if bytes.len() > MAX_LEN {
        return Some("it is longer than 63 characters");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Some("it must start with a-z or 0-9");
    }
    if !bytes
        .iter()
        .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("it may hold only a-z, 0-9 and '-'");
    }
    None
}

/// Check a zone name.
pub fn zone(name: &str) -> Result<()> {
    check("zone", name)
}

/// Check a template name.
pub fn template(name: &str) -> Result<()> {
    check("template", name)
}

fn check(kind: &'static str, name: &str) -> Result<()> {
    match problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            kind,
            name: name.to_string(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_names() {
        for n in ["a", "0", "web1", "db-3", "a-", &"x".repeat(63)] {
            assert_eq!(problem(n), None, "{n}");
        }
    }

    #[test]
    fn refuses_bad_names() {
        let long = "x".repeat(64);
        let cases: [(&str, &str); 9] = [
            ("", "empty"),
            ("../x", "start"),
            ("-a", "start"),
            ("Web", "start"),
            ("wEb", "only"),
            ("a/b", "only"),
            ("a.b", "only"),
            ("zöne", "only"),
            (&long, "longer"),
        ];
        for (n, why) in cases {
            let p = problem(n).unwrap_or_else(|| panic!("{n:?} accepted"));
            assert!(p.contains(why), "{n:?}: {p}");
        }
    }

    #[test]
    fn error_names_the_kind_and_fix() {
        let e = zone("../x").unwrap_err().to_string();
        assert!(e.starts_with("zone name \"../x\" is invalid"), "{e}");
        assert!(e.contains("a-z, 0-9"), "{e}");
    }
}
