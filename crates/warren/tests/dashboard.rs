//! The web dashboard end to end: a real daemon with its loopback HTTP listener on a
//! temporary root, driven by headless Chromium (Debian's `chromium` through
//! playwright-core: crates/warren-daemon/ui/e2e/dashboard.mjs): the page lists the zone,
//! boots it, sees the lifecycle event through the event stream, runs a command in the
//! web terminal, sees a halt made by the CLI arrive as an event; the screenshots land in a scratch directory, or in docs/screenshots/ with
//! WARREN_SCREENSHOTS=docs/screenshots. And: the committed build of
//! the page (ui/dist, embedded in the daemon) is what its source builds to.
//!
//! Needs chromium, node and `npm ci` in crates/warren-daemon/ui (scripts/test.sh
//! installs them); without them the tests fail saying so, never pass.

mod common;
mod daemon_client;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_busybox, Env};
use daemon_client::daemon_exe;

/// crates/warren-daemon/ui.
fn ui_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../warren-daemon/ui")
}

/// Node and the UI's npm packages, or a loud failure saying how to get them.
fn require_node() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is missing: apt-get install nodejs npm (scripts/test.sh does)"
    );
    assert!(
        ui_dir().join("node_modules/playwright-core").is_dir()
            && ui_dir().join("node_modules/esbuild").is_dir(),
        "{}/node_modules is missing: run 'npm ci' there (scripts/test.sh does)",
        ui_dir().display()
    );
}

/// A daemon with `--listen-http 127.0.0.1:0`, killed on drop; `url` is the dashboard's
/// URL with its token, as the daemon printed it.
struct Dashboard {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dashboard {
    fn start(env: &Env) -> Dashboard {
        let dir = tempfile::Builder::new()
            .prefix("warren-dashboard-test-")
            .tempdir_in("/tmp")
            .unwrap();
        let mut child = Command::new(daemon_exe())
            .env("WARREN_ROOT", env.root())
            .env("WARREN_RUN_DIR", env.root().join("run"))
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .env_remove("WARREN_CGROUP")
            .env_remove("WARREN_STORAGE")
            .arg("--socket")
            .arg(dir.path().join("warren.sock"))
            .args(["--listen-http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if let Some(u) = line.split_whitespace().find(|w| w.contains("?token=")) {
                    let _ = tx.send(u.to_string());
                }
            }
        });
        let mut d = Dashboard {
            child,
            url: String::new(),
            _dir: dir,
        };
        d.url = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the daemon did not print its dashboard URL within 10 s");
        // The token file is root-only.
        let token = env.root().join("run/dashboard.token");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&token).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "{}", token.display());
        assert!(d
            .url
            .ends_with(std::fs::read_to_string(&token).unwrap().trim()));
        d
    }

    fn base(&self) -> &str {
        self.url.split("/?token=").next().unwrap()
    }
}

fn curl(args: &[&str]) -> String {
    let o = Command::new("curl")
        .args(["-s", "-m", "10"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_browser_lists_boots_and_logs_into_a_zone() {
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: apt-get install chromium (scripts/test.sh does); this test drives the dashboard in it"
    );
    require_node();
    let env = Env::new();
    require_busybox();
    env.ok(&["template", "create", "bb", "--busybox"]);
    let zone = format!("dash{}", std::process::id());
    env.ok(&["create", &zone, "--template", "bb"]);
    env.ok(&["install", &zone]);
    let d = Dashboard::start(&env);

    // Without the token (or from another site) nothing is served.
    let base = d.base().to_string();
    assert!(curl(&[&format!("{base}/1.0/zones")]).contains("\"forbidden\""));
    let cross = curl(&[
        "-H",
        &format!(
            "authorization: Bearer {}",
            d.url.rsplit('=').next().unwrap()
        ),
        "-H",
        "origin: http://evil.example",
        &format!("{base}/1.0/zones"),
    ]);
    assert!(cross.contains("cross-site"), "{cross}");

    // The screenshots go to a scratch directory (a test run must not change the
    // checkout); WARREN_SCREENSHOTS=docs/screenshots refreshes the committed ones.
    let scratch = tempfile::tempdir().unwrap();
    let shots = match std::env::var_os("WARREN_SCREENSHOTS") {
        Some(dir) => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir),
        None => scratch.path().to_path_buf(),
    };
    std::fs::create_dir_all(&shots).unwrap();
    let t = Instant::now();
    let mut node = Command::new("node")
        .arg("e2e/dashboard.mjs")
        .current_dir(ui_dir())
        .env("DASHBOARD_URL", &d.url)
        .env("ZONE", &zone)
        .env("SHOTS", &shots)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = node.stderr.take().unwrap();
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut text = String::new();
    for line in BufReader::new(node.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        eprintln!("{line}");
        if line == "e2e: halt it now" {
            // The page is open; a halt made by the CLI must reach it as an event.
            env.ok(&["halt", &zone, "--timeout", "5"]);
        }
        text.push_str(&line);
        text.push('\n');
    }
    let status = node.wait().unwrap();
    text.push_str(&errors.join().unwrap());
    eprintln!("(in {:?})", t.elapsed());
    assert!(status.success() && text.contains("e2e: PASS"), "{text}");
    assert!(text.contains("web terminal ran a command"), "{text}");
    assert!(text.contains("halt of"), "{text}");
    assert!(text.contains("config set max-processes=50"), "{text}");
    assert!(text.contains("after confirming"), "{text}");
    // The page's config set and delete are what the CLI sees.
    let cfg = env.ok(&["config", "get", &zone, "max-processes"]);
    assert!(cfg.stdout.contains("50"), "{}", cfg.stdout);
    assert!(!env.root().join("zones").join(format!("{zone}c")).exists());
    // What the page saw last is what the CLI says.
    assert_eq!(env.state(&zone), "installed");
    for s in [
        "zones.png",
        "zone-detail.png",
        "terminal.png",
        "memstat.png",
    ] {
        assert!(shots.join(s).metadata().unwrap().len() > 1000, "{s}");
    }
}

#[test]
fn the_committed_page_is_what_its_source_builds_to() {
    require_node();
    let out = tempfile::tempdir().unwrap();
    let r = Command::new("node")
        .arg("build.mjs")
        .current_dir(ui_dir())
        .env("OUT_DIR", out.path())
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for f in ["index.html", "app.js", "app.css"] {
        let built = std::fs::read(out.path().join(f)).unwrap();
        let committed = std::fs::read(ui_dir().join("dist").join(f)).unwrap();
        assert!(
            built == committed,
            "crates/warren-daemon/ui/dist/{f} is not what the source builds to; run 'npm ci && npm run build' in crates/warren-daemon/ui and commit dist/"
        );
    }
}
