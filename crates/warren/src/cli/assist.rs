//! The CLI's help beyond `--help`: "did you mean" for names that do not exist, and
//! who may run what.
//!
//! Who may run what: every verb that reads or changes the state root needs root. The
//! state root is root's alone (its directories are 0700: templates hold images' setuid
//! files and device nodes, configs and consoles hold tenants' data; docs/isolation.md,
//! "Hostile images"), and warren reads zones' cgroups and /proc entries of processes
//! in other user namespaces. A `warren` group with read-only verbs (list, info, stat)
//! was considered and declined: it would need a second, group-readable copy of the
//! zones' state that every verb keeps in step, a larger surface than `sudo warren list`
//! saves. So a non-root user gets one clear message (exit 8) before anything is read;
//! only verbs that touch no state (`completions`, `man`, `config keys`) run as anyone.

use super::*;

/// Whether `cmd` needs root (see the module doc).
pub(super) fn needs_root(cmd: &Command) -> bool {
    !matches!(
        cmd,
        Command::Completions { .. } | Command::Man { .. } | Command::Config(ConfigCmd::Keys)
    )
}

/// The known name nearest to `name`: within 2 edits (3 for long names), or one that
/// starts with it or that it starts with; ties go to the first in order.
pub(super) fn nearest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    let limit = if name.chars().count() > 6 { 3 } else { 2 };
    known
        .iter()
        .filter(|k| k.as_str() != name)
        .map(|k| {
            let d = config::edit_distance(k, name);
            let prefix = !name.is_empty() && (k.starts_with(name) || name.starts_with(k.as_str()));
            (if prefix { d.min(1) } else { d }, k.as_str())
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The state root whose names "did you mean" draws from: set by `main` when running
/// as root (a non-root caller may not learn the names), so every printed error gets
/// its hint, also each one of a verb on several zones.
static SUGGEST_FROM: std::sync::OnceLock<Layout> = std::sync::OnceLock::new();

pub(super) fn suggest_from(root: &Path) {
    let _ = SUGGEST_FROM.set(Layout::new(root));
}

/// "did you mean" for an error naming a zone, template or profile that does not exist.
pub(super) fn hint(e: &Error) -> Option<String> {
    let layout = SUGGEST_FROM.get()?;
    let (what, name, known) = match e {
        Error::NoSuchZone(n) => ("zone", n, zone::names_in(layout).ok()?),
        Error::NoSuchTemplate(n) => (
            "template",
            n,
            template::list(layout)
                .ok()?
                .into_iter()
                .map(|m| m.name)
                .collect(),
        ),
        Error::NoSuchProfile(n) => ("profile", n, crate::profile::list(layout).ok()?),
        Error::WithCleanup { primary, .. } => return hint(primary),
        _ => return None,
    };
    nearest(name, &known).map(|k| format!("did you mean {what} '{k}'?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names_by_spelling_and_prefix() {
        let known: Vec<String> = ["web1", "web2", "db-main", "cache"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(nearest("webl", &known), Some("web1"));
        assert_eq!(nearest("db", &known), Some("db-main"));
        assert_eq!(nearest("cahce", &known), Some("cache"));
        assert_eq!(nearest("zzzzzz", &known), None);
        assert_eq!(nearest("web1", &known), Some("web2"));
    }
}
