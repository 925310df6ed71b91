//! The `class | attempt | expected | result` table every class prints, and the small
//! helpers its rows are built from.

use super::*;

pub(crate) struct Table {
    class: &'static str,
    rows: Vec<(String, String, String, bool)>,
}

impl Table {
    pub(crate) fn new(class: &'static str) -> Table {
        Table {
            class,
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(
        &mut self,
        attempt: impl Into<String>,
        expected: impl Into<String>,
        ok: bool,
        result: impl AsRef<str>,
    ) {
        let result = short(result.as_ref(), 110);
        self.rows
            .push((attempt.into(), expected.into(), result, ok));
    }

    /// A row whose result is a command's exit code and output.
    pub(crate) fn run_row(
        &mut self,
        attempt: impl Into<String>,
        expected: impl Into<String>,
        ok: bool,
        r: &Run,
    ) {
        self.row(attempt, expected, ok, summary(r));
    }

    /// A host user (nobody, see [`as_nobody`]) runs `script`: the row holds when it
    /// was refused with EACCES and reached nothing.
    pub(crate) fn denied_to_nobody(&mut self, attempt: impl Into<String>, script: &str) {
        let r = as_nobody(script);
        self.row(attempt, "EACCES", denied(&r), summary(&r));
    }

    /// Print the table; fail naming every row that did not hold.
    pub(crate) fn finish(self) {
        let w0 = self.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let w1 = self.rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let wc = self.class.len().max(5);
        println!(
            "{:wc$} | {:w0$} | {:w1$} | result",
            "class", "attempt", "expected"
        );
        for (attempt, expected, result, ok) in &self.rows {
            let mark = if *ok { "ok" } else { "FAILED" };
            println!(
                "{:wc$} | {attempt:w0$} | {expected:w1$} | {mark}: {result}",
                self.class
            );
        }
        let failed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| !r.3)
            .map(|r| format!("class {}: {} ({})", self.class, r.0, r.2))
            .collect();
        println!("{}: {} attempts", self.class, self.rows.len());
        assert!(
            failed.is_empty(),
            "not denied as expected:\n{}",
            failed.join("\n")
        );
    }
}

pub(crate) fn short(s: &str, n: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let s = s.trim();
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_string()
    }
}

pub(crate) fn output(r: &Run) -> String {
    format!("{}{}", r.stdout, r.stderr)
}

pub(crate) fn summary(r: &Run) -> String {
    format!("exit {} {}", r.code, output(r))
}

/// The value of `key=` in a line of `key=value` words.
pub(crate) fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// Fail loudly if a tool the test drives is missing.
pub(crate) fn require_tool(name: &str, why: &str) {
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| Path::new(d).join(name).is_file());
    assert!(found, "this test needs `{name}` on the host ({why})");
}

/// A private temporary directory (0755, so an unprivileged user could use it).
pub(crate) fn scratch(prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Refused with EACCES, and no sign of the attempt getting through.
pub(crate) fn denied(r: &Run) -> bool {
    let out = output(r);
    out.contains("Permission denied") && !out.contains("euid=0") && !out.contains("REACHED")
}
