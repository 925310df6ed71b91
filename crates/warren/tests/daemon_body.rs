//! The regression test of schemathesis's "connection closed without response": a
//! request whose body arrives after its headers still gets its answer, and the
//! connection stays usable, on every kind of early answer (405, 404, the upload
//! route's refusals), over the unix socket and through a TCP bridge (socat).

mod common;
mod daemon_client;

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use common::Env;
use daemon_client::{wait_for, Daemon};

/// Send `head`, wait until the daemon could have answered it, then `rest`; all that
/// comes back.
fn split_request<S: Read + Write>(mut s: S, head: &str, rest: &[u8]) -> String {
    s.write_all(head.as_bytes()).unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sent = s.write_all(rest);
    let mut got = Vec::new();
    let read = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        sent.is_ok() && read.is_ok(),
        "the daemon closed the connection before the body came: write {sent:?}, read {read:?}, got {text:?}"
    );
    text
}

/// schemathesis's Coverage phase once got "Connection aborted: remote end closed
/// connection without response" for `OPTIONS /1.0/operations` with a body, through
/// its socat bridge: the daemon answered 405 before the body had come and closed the
/// connection with it unread. Here the body always comes late.
#[test]
fn a_body_that_comes_after_its_headers_still_gets_the_answer() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    assert!(
        Path::new("/usr/bin/socat").exists(),
        "this test needs socat (scripts/test.sh installs it)"
    );
    let cases = [
        ("OPTIONS", "/1.0/operations", 405),
        ("PUT", "/1.0/zones", 405),
        ("POST", "/1.0/no-such-path", 404),
        // The upload route reads its body itself: its early refusals too.
        ("PATCH", "/1.0/import/upload", 405),
        ("POST", "/1.0/import/upload?name=Bad_Name", 400),
        ("POST", "/1.0/import/upload?bogus=1", 400),
    ];
    // Over the unix socket: the late body, then a second request on the connection.
    for (method, path, want) in cases {
        let s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let head = format!("{method} {path} HTTP/1.1\r\nHost: warren\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n");
        let text = split_request(
            s,
            &head,
            b"{\"a\":1}GET /1.0 HTTP/1.1\r\nHost: warren\r\nConnection: close\r\n\r\n",
        );
        assert!(
            text.starts_with(&format!("HTTP/1.1 {want} ")),
            "{method} {path}: {text}"
        );
        assert!(
            text.contains("HTTP/1.1 200 OK"),
            "{method} {path}: the connection served the next request too: {text}"
        );
    }
    // Through a TCP bridge, as schemathesis reaches it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut bridge = std::process::Command::new("socat")
        .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"))
        .arg(format!("UNIX-CONNECT:{}", d.socket.display()))
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(&mut bridge);
    wait_for(Duration::from_secs(10), "the TCP bridge", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    for (method, path, want) in cases {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let head = format!("{method} {path} HTTP/1.1\r\nHost: warren\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n");
        let text = split_request(s, &head, b"{\"a\":1}");
        assert!(
            text.starts_with(&format!("HTTP/1.1 {want} ")),
            "{method} {path} via socat: {text}"
        );
    }
}
