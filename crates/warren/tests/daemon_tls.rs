//! Remote access end to end: a daemon with `--listen-https 127.0.0.1:<free port>` on a
//! temporary root, real TLS clients (the CLI's `warren remote` / `warren --remote`, and
//! curl with `--cert/--key` for the refusals), each client with its own config directory.

mod common;
mod daemon_client;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{require_busybox, Env, Run};
use daemon_client::Daemon;

/// A daemon listening on TLS too; its URL.
struct Https {
    _daemon: Daemon,
    url: String,
}

fn start(env: &Env) -> Https {
    // A free port: bound, read, released (the daemon binds it right after).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let d = Daemon::start(env, &["--listen-https", &addr]);
    let t = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the daemon did not listen on {addr} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Https {
        _daemon: d,
        url: format!("https://{addr}"),
    }
}

/// `warren ARGS` as a client whose configuration (key, certificate, remotes) is `cfg`.
fn client(env: &Env, cfg: &Path, args: &[&str]) -> Run {
    let o = env
        .cmd()
        .env("WARREN_CONFIG_DIR", cfg)
        .args(args)
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A new client configuration directory in the test's root.
fn cfg(env: &Env, name: &str) -> PathBuf {
    env.root().join("clients").join(name)
}

/// A one-time token from the server (the CLI on the server's root).
fn token(env: &Env, args: &[&str]) -> String {
    let mut a = vec!["remote", "trust-token"];
    a.extend(args);
    env.ok(&a).stdout.trim().to_string()
}

/// curl over TLS, with the client certificate of `cfg` if given: (curl's exit code,
/// HTTP status or 0, body).
fn curl(url: &str, cert: Option<&Path>, method: &str, path: &str) -> (i32, u16, String) {
    let mut c = Command::new("curl");
    c.args([
        "-sS",
        "-k",
        "--max-time",
        "60",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
    ]);
    if let Some(d) = cert {
        c.arg("--cert")
            .arg(d.join("client.crt"))
            .arg("--key")
            .arg(d.join("client.key"));
    }
    let o = c
        .arg(format!("{url}{path}"))
        .output()
        .expect("curl runs (apt-get install curl)");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        o.status.code().unwrap_or(-1),
        code.trim().parse().unwrap_or(0),
        body.to_string(),
    )
}

#[test]
fn clients_without_a_trusted_certificate_are_refused() {
    let env = Env::new();
    let s = start(&env);
    // No certificate: the handshake itself is refused.
    let (rc, status, _) = curl(&s.url, None, "GET", "/1.0/zones");
    assert_ne!(rc, 0, "a client without a certificate got through");
    assert_eq!(status, 0, "no HTTP answer without a certificate");
    // A certificate the server does not trust (made by a refused `remote add`: the
    // token names the right server but its secret is unknown): 403, structured.
    let fp = token(&env, &[]).split_once(':').unwrap().0.to_string();
    let stranger = cfg(&env, "stranger");
    let bogus = format!("{fp}:{}", "0".repeat(64));
    client(
        &env,
        &stranger,
        &["remote", "add", "srv", &s.url, "--token", &bogus],
    )
    .fails(8, "unknown or was already used");
    let (rc, status, body) = curl(&s.url, Some(&stranger), "GET", "/1.0/zones");
    assert_eq!((rc, status), (0, 403), "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["code"], "forbidden", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("not trusted"),
        "{v}"
    );
    assert!(v["fix"].as_str().unwrap().contains("trust-token"), "{v}");
    // And it was not added as a remote.
    let l = client(&env, &stranger, &["remote", "list", "--json"]).ok();
    assert_eq!(l.stdout.trim(), "{}");
}

#[test]
fn a_token_lets_one_client_in_once_and_the_cli_works_remotely() {
    require_busybox();
    let env = Env::new();
    env.ok(&["template", "create", "bb", "--busybox"]);
    env.ok(&["create", "tz1", "--template", "bb"]);
    env.ok(&["install", "tz1"]);
    let s = start(&env);
    let t = token(&env, &["--name", "laptop"]);
    let me = cfg(&env, "laptop");
    client(&env, &me, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    let key = std::fs::metadata(me.join("client.key")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
        0o600
    );
    let listed = client(&env, &me, &["remote", "list"]).ok();
    assert!(
        listed.stdout.contains("srv") && listed.stdout.contains(&s.url),
        "{}",
        listed.stdout
    );
    // The CLI's verbs through the API with the client certificate.
    let l = client(&env, &me, &["--remote", "srv", "list", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&l.stdout).unwrap();
    assert_eq!(v[0]["name"], "tz1", "{v}");
    assert_eq!(v[0]["state"], "installed", "{v}");
    client(&env, &me, &["--remote", "srv", "boot", "tz1"]).ok();
    assert_eq!(
        env.state("tz1"),
        "running",
        "the server's CLI sees the remote boot"
    );
    let i = client(&env, &me, &["--json", "--remote", "srv", "info", "tz1"]).ok();
    assert!(i.stdout.contains("running"), "{}", i.stdout);
    client(&env, &me, &["--remote", "srv", "halt", "tz1"]).ok();
    assert_eq!(env.state("tz1"), "installed");
    client(&env, &me, &["--remote", "srv", "boot", "nosuch"]).fails(3, "nosuch");
    // The token was used: another client cannot use it again.
    let other = cfg(&env, "other");
    client(
        &env,
        &other,
        &["remote", "add", "srv", &s.url, "--token", &t],
    )
    .fails(8, "already used");
    // The store keeps the secret hashed, and the trusted certificate under its name.
    let store = std::fs::read_to_string(env.root().join("daemon/trust.json")).unwrap();
    assert!(
        !store.contains(t.split_once(':').unwrap().1),
        "the secret is stored in clear"
    );
    assert!(store.contains("laptop"));
    // The server lists the certificate, and revoking it refuses its next connection.
    let tl = env.ok(&["--json", "remote", "trust-list"]);
    let tv: serde_json::Value = serde_json::from_str(&tl.stdout).unwrap();
    assert_eq!(tv[0]["name"], "laptop", "{tv}");
    assert_eq!(tv[0]["role"], "read-write", "{tv}");
    env.ok(&["remote", "trust-remove", "laptop"]);
    client(&env, &me, &["--remote", "srv", "list"]).fails(8, "not trusted");
    env.run(&["remote", "trust-remove", "laptop"])
        .fails(3, "no trusted certificate");
    // Forgetting the remote leaves the server as it is.
    client(&env, &me, &["remote", "remove", "srv"]).ok();
    client(&env, &me, &["--remote", "srv", "list"]).fails(3, "no remote 'srv'");
}

#[test]
fn expired_tokens_and_wrong_fingerprints_are_refused() {
    let env = Env::new();
    let s = start(&env);
    let old = token(&env, &["--ttl", "0"]);
    let c1 = cfg(&env, "late");
    client(
        &env,
        &c1,
        &["remote", "add", "srv", &s.url, "--token", &old],
    )
    .fails(8, "expired");
    // A token whose fingerprint is not the server's (a server in between): the client
    // refuses the handshake before it sends the secret...
    let t = token(&env, &[]);
    let (fp, secret) = t.split_once(':').unwrap();
    let forged: String = fp
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    let c2 = cfg(&env, "mitm");
    client(
        &env,
        &c2,
        &[
            "remote",
            "add",
            "srv",
            &s.url,
            "--token",
            &format!("{forged}:{secret}"),
        ],
    )
    .fails(1, "someone may be in between");
    assert_eq!(
        client(&env, &c2, &["remote", "list", "--json"])
            .ok()
            .stdout
            .trim(),
        "{}"
    );
    // ... so the secret is still unused, and works with the right fingerprint.
    client(&env, &c2, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    client(&env, &c2, &["--remote", "srv", "list"]).ok();
}

#[test]
fn a_read_only_certificate_may_get_but_not_post() {
    let env = Env::new();
    let s = start(&env);
    let t = token(&env, &["--name", "viewer", "--read-only"]);
    let ro = cfg(&env, "viewer");
    client(&env, &ro, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    client(&env, &ro, &["--remote", "srv", "list"]).ok();
    let (rc, status, body) = curl(&s.url, Some(&ro), "GET", "/1.0/zones");
    assert_eq!((rc, status), (0, 200), "{body}");
    let (rc, status, body) = curl(&s.url, Some(&ro), "POST", "/1.0/zones/any/boot");
    assert_eq!((rc, status), (0, 403), "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["code"], "forbidden", "{v}");
    assert!(v["message"].as_str().unwrap().contains("read-only"), "{v}");
    client(&env, &ro, &["--remote", "srv", "halt", "any"]).fails(8, "read-only");
    // A zone's files are the tenant's data: not for a read-only client, GET included.
    let (rc, status, body) = curl(
        &s.url,
        Some(&ro),
        "GET",
        "/1.0/zones/any/files?path=/etc/hostname",
    );
    assert_eq!((rc, status), (0, 403), "{body}");
    assert!(body.contains("not a zone's files"), "{body}");
}

/// A minimal WebSocket client over TLS with a client certificate (Debian's python3
/// and its ssl module: nothing to install). argv: host port path cert key origin
/// typed want. Prints the HTTP status line; on 101 types `typed` as a binary
/// message, reads the terminal's output until `want` appears (exit 0) or 30 s pass
/// (exit 1), then types `exit`. Exit 2: no 101 (the status line and body printed).
const WS_CLIENT: &str = r#"
import base64, os, socket, ssl, struct, sys, time
host, port, path, cert, key, origin, typed, want = sys.argv[1:9]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
if cert:
    ctx.load_cert_chain(cert, key)
s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=30))
k = base64.b64encode(os.urandom(16)).decode()
req = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {k}\r\nSec-WebSocket-Version: 13\r\n"
if origin:
    req += f"Origin: {origin}\r\n"
s.sendall((req + "\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    c = s.recv(4096)
    if not c:
        break
    buf += c
head, _, rest = buf.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode(), flush=True)
if b" 101 " not in head.split(b"\r\n")[0]:
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while length and len(rest) < length[0]:
        c = s.recv(65536)
        if not c:
            break
        rest += c
    print(rest.decode(errors="replace"))
    sys.exit(2)
def send(data):
    mask = os.urandom(4)
    n = len(data)
    hdr = bytes([0x82]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
def frames(data):
    out = b""
    while len(data) >= 2:
        n = data[1] & 0x7F
        off = 2
        if n == 126:
            if len(data) < 4: break
            n, off = struct.unpack(">H", data[2:4])[0], 4
        elif n == 127:
            if len(data) < 10: break
            n, off = struct.unpack(">Q", data[2:10])[0], 10
        if len(data) < off + n: break
        out += data[off:off + n]
        data = data[off + n:]
    return out, data
time.sleep(0.5)
send(typed.encode())
seen, pending, end = b"", rest, time.time() + 30
while want.encode() not in seen and time.time() < end:
    got, pending = frames(pending)
    seen += got
    if want.encode() in seen:
        break
    try:
        c = s.recv(65536)
    except socket.timeout:
        continue
    if not c:
        break
    pending += c
print(seen.decode(errors="replace"))
send(b"exit\n")
sys.exit(0 if want.encode() in seen else 1)
"#;

/// The terminal's WebSocket over TLS as `cfg`'s certificate (or none): (exit code of
/// the client, what it printed).
fn ws_terminal(url: &str, cfg: Option<&Path>, zone: &str, origin: &str) -> (i32, String) {
    let addr = url.strip_prefix("https://").unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let (cert, key) = cfg.map_or((String::new(), String::new()), |d| {
        (
            d.join("client.crt").display().to_string(),
            d.join("client.key").display().to_string(),
        )
    });
    let o = Command::new("/usr/bin/python3")
        .args(["-c", WS_CLIENT, host, port])
        .arg(format!("/ui/terminal/{zone}?cols=100&rows=30"))
        .args([&cert, &key, origin, "echo tls-$((6*7))-ok\n", "tls-42-ok"])
        .output()
        .expect("this test needs Debian's /usr/bin/python3 (its ssl module)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

#[test]
fn the_dashboard_and_its_terminal_work_over_tls_for_a_read_write_certificate_only() {
    require_busybox();
    let env = Env::new();
    env.ok(&["template", "create", "bb", "--busybox"]);
    env.ok(&["create", "tt1", "--template", "bb"]);
    env.ok(&["install", "tt1"]);
    env.ok(&["boot", "tt1"]);
    let s = start(&env);
    let rw = cfg(&env, "browser");
    let t = token(&env, &["--name", "browser"]);
    client(&env, &rw, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    // The page itself is served over TLS to a trusted certificate.
    let (rc, status, body) = curl(&s.url, Some(&rw), "GET", "/");
    assert_eq!((rc, status), (0, 200), "{body}");
    assert!(
        body.contains("<html") || body.contains("<!doctype"),
        "{body}"
    );
    // The terminal: a command typed in runs in the zone, its output comes back.
    let (code, out) = ws_terminal(&s.url, Some(&rw), "tt1", "");
    assert_eq!(code, 0, "the terminal over TLS: {out}");
    assert!(out.starts_with("HTTP/1.1 101"), "{out}");
    // From the dashboard's own page (its Origin is this host) too.
    let (code, out) = ws_terminal(&s.url, Some(&rw), "tt1", &s.url);
    assert_eq!(code, 0, "the terminal with the page's own Origin: {out}");
    // A page of another site, in a browser holding the certificate: refused.
    let (code, out) = ws_terminal(&s.url, Some(&rw), "tt1", "https://evil.example");
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(" 403 ") && out.contains("cross-site"), "{out}");
    // An untrusted certificate: refused before any login runs.
    let stranger = cfg(&env, "stranger");
    let fp = token(&env, &[]).split_once(':').unwrap().0.to_string();
    client(
        &env,
        &stranger,
        &[
            "remote",
            "add",
            "srv",
            &s.url,
            "--token",
            &format!("{fp}:{}", "0".repeat(64)),
        ],
    )
    .fails(8, "unknown or was already used");
    let (code, out) = ws_terminal(&s.url, Some(&stranger), "tt1", "");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(" 403 ") && out.contains("not trusted"),
        "{out}"
    );
    // A read-only certificate may GET the page but not open a terminal.
    let ro = cfg(&env, "viewer");
    let t = token(&env, &["--name", "viewer", "--read-only"]);
    client(&env, &ro, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    let (rc, status, body) = curl(&s.url, Some(&ro), "GET", "/");
    assert_eq!((rc, status), (0, 200), "{body}");
    let (code, out) = ws_terminal(&s.url, Some(&ro), "tt1", "");
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(" 403 ") && out.contains("read-write"), "{out}");
    // No certificate at all: the handshake fails.
    let (code, out) = ws_terminal(&s.url, None, "tt1", "");
    assert!(code != 0 && !out.contains("HTTP/1.1"), "{out}");
    env.ok(&["halt", "tt1"]);
}

#[test]
fn suspend_snapshots_stat_config_and_exec_work_remotely() {
    require_busybox();
    let env = Env::new();
    env.ok(&["template", "create", "bb", "--busybox"]);
    env.ok(&["create", "tz2", "--template", "bb"]);
    env.ok(&["install", "tz2"]);
    let s = start(&env);
    let t = token(&env, &["--name", "ops"]);
    let me = cfg(&env, "ops");
    client(&env, &me, &["remote", "add", "srv", &s.url, "--token", &t]).ok();
    let remote = |args: &[&str]| {
        let mut a = vec!["--remote", "srv"];
        a.extend_from_slice(args);
        client(&env, &me, &a)
    };
    remote(&["boot", "tz2"]).ok();
    // exec: the command's output, and its exit code as the client's.
    let x = remote(&[
        "exec",
        "tz2",
        "--",
        "sh",
        "-c",
        "echo hi; echo oops >&2; exit 3",
    ]);
    assert_eq!(
        (x.code, x.stdout.as_str(), x.stderr.as_str()),
        (3, "hi\n", "oops\n")
    );
    // A --json after the `--` is the command's; one before the verb is the client's.
    let x = client(
        &env,
        &me,
        &[
            "--json", "--remote", "srv", "exec", "tz2", "--", "echo", "--json",
        ],
    )
    .ok();
    let v: serde_json::Value = serde_json::from_str(&x.stdout).unwrap();
    assert_eq!(v["stdout"], "--json\n", "{v}");
    // config set / get / unset, seen by the server's CLI.
    remote(&["config", "set", "tz2", "max-processes=77"]).ok();
    let g = remote(&["config", "get", "tz2", "max-processes"]).ok();
    assert!(g.stdout.contains("77"), "{}", g.stdout);
    assert!(
        env.ok(&["config", "show", "tz2"]).stdout.contains("77"),
        "the server sees the remote config set"
    );
    remote(&["config", "unset", "tz2", "max-processes"]).ok();
    assert!(!env.ok(&["config", "show", "tz2"]).stdout.contains("77"));
    // stat of one zone.
    let st = client(&env, &me, &["--json", "--remote", "srv", "stat", "tz2"]).ok();
    assert!(st.stdout.contains("tz2"), "{}", st.stdout);
    // suspend and resume.
    remote(&["suspend", "tz2"]).ok();
    assert_eq!(env.state("tz2"), "suspended");
    remote(&["resume", "tz2"]).ok();
    assert_eq!(env.state("tz2"), "running");
    // snapshots: create, list, restore (halted), delete.
    remote(&["snapshot", "create", "tz2", "s1"]).ok();
    let l = client(
        &env,
        &me,
        &["--json", "--remote", "srv", "snapshot", "list", "tz2"],
    )
    .ok();
    let v: serde_json::Value = serde_json::from_str(&l.stdout).unwrap();
    assert_eq!(v[0]["name"], "s1", "{v}");
    remote(&["halt", "tz2"]).ok();
    remote(&["snapshot", "restore", "tz2", "s1"]).ok();
    remote(&["snapshot", "delete", "tz2", "s1"]).ok();
    remote(&["snapshot", "restore", "tz2", "s1"]).fails(3, "s1");
    assert_eq!(
        env.ok(&["snapshot", "list", "tz2", "--json"]).stdout.trim(),
        "[]"
    );
    // A verb --remote does not run is refused, naming those it does.
    remote(&["clone", "tz2", "tz3"]).fails(2, "--remote runs");
}
