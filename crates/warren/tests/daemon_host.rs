//! The host verbs through the daemon on a temporary root: `POST`/`DELETE /1.0/swap`
//! (a small swap file in the test's root, turned off and removed by a guard also on
//! failure).

mod common;
mod daemon_client;

use std::process::Command;

use common::{require_root, Env};
use daemon_client::Daemon;

/// Turns off and removes the test's swap file and restores vm.swappiness, also on
/// panic (the API's DELETE is what the test checks; this is the net under it).
struct SwapGuard {
    file: std::path::PathBuf,
    swappiness: String,
}

impl Drop for SwapGuard {
    fn drop(&mut self) {
        let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
        if swaps.contains(self.file.to_str().unwrap()) {
            let _ = Command::new("swapoff").arg(&self.file).status();
        }
        let _ = std::fs::remove_file(&self.file);
        let now = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap_or_default();
        if now != self.swappiness {
            let _ = std::fs::write("/proc/sys/vm/swappiness", self.swappiness.trim());
        }
    }
}

#[test]
fn swap_is_enabled_and_disabled_through_the_api() {
    require_root();
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let file = env.root().join("swap/swapfile");
    let _guard = SwapGuard {
        file: file.clone(),
        swappiness: std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
    };
    // Refused before anything is made: a bad size, a relative file, both kinds.
    let e = d.json("POST", "/1.0/swap", Some(r#"{"size":"12X"}"#), 400);
    assert_eq!(e["field"], "size", "{e}");
    let e = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","file":"rel/swap"}"#),
        400,
    );
    assert_eq!(e["field"], "file", "{e}");
    let e = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","file":"/tmp/x","zram":true}"#),
        400,
    );
    assert_eq!(e["field"], "file", "{e}");
    assert!(!file.exists(), "a refused enable made {}", file.display());

    let before = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let r = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","swappiness":61}"#),
        200,
    );
    assert_eq!(r["changed"], true, "{r}");
    assert_eq!(r["size_bytes"], 16u64 << 20, "{r}");
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(swaps.contains(file.to_str().unwrap()), "{swaps}");
    // The CLI sees the swap the API enabled (the same record in the root).
    let s = env.ok(&["swap", "status", "--json"]).stdout;
    assert!(s.contains(file.to_str().unwrap()), "{s}");
    let st = d.json("GET", "/1.0/swap", None, 200);
    assert_eq!(st["warren"]["path"], file.to_str().unwrap(), "{st}");
    // Enabling again changes nothing.
    let r = d.json("POST", "/1.0/swap", Some(r#"{"size":"16M"}"#), 200);
    assert_eq!(r["changed"], false, "{r}");

    let r = d.json("DELETE", "/1.0/swap", None, 200);
    assert_eq!(r["changed"], true, "{r}");
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(!swaps.contains(file.to_str().unwrap()), "{swaps}");
    assert!(!file.exists(), "the swap file is left: {}", file.display());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        before,
        "vm.swappiness restored"
    );
    let r = d.json("DELETE", "/1.0/swap", None, 200);
    assert_eq!(r["changed"], false, "{r}");
}
