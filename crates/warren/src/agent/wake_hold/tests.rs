//! Unit tests of [`super::Holder`]: the budget, the take's checks, the control socket's
//! pause, and releases of copies that zones (python3 processes staged as zones) make
//! linger.

use super::*;
use std::sync::mpsc;

/// This process's TCP listener, as a zone's watched socket (held by `me`).
fn own_listener() -> (std::net::TcpListener, Watched) {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ino = File::from(l.as_fd().try_clone_to_owned().unwrap())
        .metadata()
        .unwrap()
        .ino() as u32;
    let w = Watched {
        inode: ino,
        kind: super::super::wake_diag::TCP,
        held_by: (std::process::id() as i32, l.as_raw_fd()),
    };
    (l, w)
}

/// Third review, finding 4: the budget counts what is open — each holding's copies
/// and init's pidfd, and every watched zone's sock_diag socket, held zone or not,
/// once each. A zone is really held here (this process's listener).
#[test]
fn the_budget_counts_a_held_zone_and_each_sock_diag_socket_once() {
    let me = std::process::id() as i32;
    let (_l, w) = own_listener();
    let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    let (used, b) = h.usage();
    assert_eq!(used, 0);
    // The zone is watched: its sock_diag socket is open, nothing held yet.
    let diag = h.counted();
    assert_eq!(h.usage().0, 1);
    let id = h.hold("z", me, &[w], &|| true, &|_| true).unwrap();
    assert_eq!(
        h.usage().0,
        3,
        "held: its socket and its init's pidfd beside its sock_diag socket, each counted once"
    );
    // Another zone watched, not held: its sock_diag socket, for its sweep.
    let other = h.counted();
    assert_eq!(h.usage().0, 4);
    // A zone with k sockets needs k, its init's pidfd and one pidfd to take them.
    let k = (b - 4 - 2) as usize;
    assert!(h.fits(k));
    assert!(
        !h.fits(k + 1),
        "the other zone's sock_diag socket would have no descriptor"
    );
    drop(other);
    assert!(h.fits(k + 1));
    assert!(!h.fits(k + 2));
    h.release(id);
    closed(&h);
    assert_eq!(
        h.usage().0,
        1,
        "released: its socket and pidfd are given back, its sock_diag socket lives with its watch"
    );
    drop(diag);
    assert_eq!(h.usage().0, 0);
}

#[test]
fn the_budget_keeps_a_reserve() {
    assert_eq!(budget(20_000, 10), 20_000 - 10 - RESERVE);
    assert_eq!(budget(300, 100), 0);
    assert_eq!(budget(0, 5), 0);
}

#[test]
fn only_the_scanned_socket_at_that_number_is_taken() {
    assert!(names_socket("socket:[81234]", 81234));
    // Another socket, a file (a FUSE mount the zone serves), a pipe, garbage.
    assert!(!names_socket("socket:[81235]", 81234));
    assert!(!names_socket("/srv/fuse/data", 81234));
    assert!(!names_socket("pipe:[81234]", 81234));
    assert!(!names_socket("socket:[81234", 81234));
    assert!(!names_socket("socket:[]", 81234));
}

#[test]
fn a_taken_socket_must_be_the_kind_the_sweep_found() {
    use super::super::wake_diag::{TCP, UDP, UNIX};
    use warren_sys::libc::{SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM};
    assert!(is_kind(TCP, SOCK_STREAM, true));
    assert!(is_kind(UNIX, SOCK_SEQPACKET, true));
    assert!(is_kind(UDP, SOCK_DGRAM, false));
    // A connected stream socket now at the listener's number, or a stream where
    // a datagram socket was.
    assert!(!is_kind(TCP, SOCK_STREAM, false));
    assert!(!is_kind(UDP, SOCK_STREAM, false));
    assert!(!is_kind(UNIX, SOCK_DGRAM, false));
}

/// A frozen-looking zone whose scanned number now holds a non-socket, and one not
/// frozen: nothing is taken (as root: pidfd_getfd of this very process).
#[test]
fn a_number_that_is_no_longer_the_socket_or_a_thawed_zone_is_not_taken() {
    let me = std::process::id() as i32;
    let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    let (l, listener) = own_listener();
    let file = File::open("/proc/self/status").unwrap();
    use std::os::fd::AsRawFd;
    let w = |fd: i32| Watched {
        held_by: (me, fd),
        ..listener
    };
    // Not frozen: nothing is looked at.
    let r = h.hold("z", me, &[w(l.as_raw_fd())], &|| false, &|_| true);
    assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
    // The number names a file now: not taken (nothing set aside either), and the
    // scan is stale (third review, finding 3: scanned afresh at the next re-read).
    let r = h.hold("z", me, &[w(file.as_raw_fd())], &|| true, &|_| true);
    let Err(NotHeld::Stale(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.to_string().contains("no longer socket"), "{e}");
    assert!(h.set_aside.is_empty());
    // A number no longer open: stale too.
    let r = h.hold("z", me, &[w(1 << 20)], &|| true, &|_| true);
    assert!(matches!(r, Err(NotHeld::Stale(_))), "{r:?}");
    // Thawed while being taken: what was taken is let go.
    let n = std::cell::Cell::new(0);
    let r = h.hold(
        "z",
        me,
        &[w(l.as_raw_fd())],
        &|| {
            n.set(n.get() + 1);
            n.get() == 1
        },
        &|_| true,
    );
    assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
    closed(&h);
    // The socket itself, frozen throughout: held.
    // A pid that is not the zone's (reused since the scan): nothing is taken.
    let r = h.hold("z", me, &[w(l.as_raw_fd())], &|| true, &|_| false);
    let Err(NotHeld::Stale(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.to_string().contains("no longer in the zone"), "{e}");
    closed(&h);
    let id = h
        .hold("z", me, &[w(l.as_raw_fd())], &|| true, &|_| true)
        .unwrap();
    // Its socket and its init's pidfd (no sock_diag socket is counted here).
    assert_eq!(h.usage().0, 2);
    h.release(id);
    closed(&h);
}

/// A control socket whose accept failed is out of the set until resumed: a
/// connection waiting on it no longer makes every wait return at once.
#[test]
fn a_paused_control_socket_is_not_waited_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    let l = std::os::unix::net::UnixListener::bind(tmp.path().join("c.sock")).unwrap();
    h.watch_control(l.as_fd()).unwrap();
    let _waiting = std::os::unix::net::UnixStream::connect(tmp.path().join("c.sock")).unwrap();
    let ms = Duration::from_millis(100);
    assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
    // Level-triggered: again and again while it waits.
    assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
    h.pause_control(l.as_fd());
    let t = std::time::Instant::now();
    assert!(h.wait(ms).unwrap().is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t.elapsed()
    );
    h.resume_control(l.as_fd());
    assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
}

/// Wait (at most 10 s) until the closer threads closed every copy handed to them
/// (nothing is held: what is left is set aside).
fn closed(h: &Holder) {
    let t = std::time::Instant::now();
    while h.closer.pending() != 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "copies never closed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(h.used, h.set_aside.len() as u64);
}

/// A non-socket taken at a number that named the socket right before (a thaw
/// raced the check): set aside, never closed, counted. The race is staged with a
/// `/proc` whose link says socket while the real number holds a file.
#[test]
fn a_non_socket_taken_in_a_race_is_set_aside_unclosed() {
    use std::os::fd::AsRawFd;
    let me = std::process::id() as i32;
    let fake = tempfile::tempdir().unwrap();
    let file = File::open("/proc/self/status").unwrap();
    let fd = file.as_raw_fd();
    std::fs::create_dir_all(fake.path().join(format!("{me}/fd"))).unwrap();
    std::os::unix::fs::symlink("socket:[4242]", fake.path().join(format!("{me}/fd/{fd}"))).unwrap();
    let mut h = Holder::new(fake.path(), Some(10_000)).unwrap();
    let w = Watched {
        inode: 4242,
        kind: super::super::wake_diag::TCP,
        held_by: (me, fd),
    };
    let r = h.hold("z", me, &[w], &|| true, &|_| true);
    let Err(NotHeld::Failed(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(h.set_aside.len(), 1);
    assert_eq!(
        h.usage().0,
        1,
        "a set-aside descriptor counts against the budget"
    );
    // Still open after the holder is gone: the kernel closes it when the process
    // (here the test binary, there the agent) exits.
    let dup = h.set_aside[0].as_raw_fd();
    assert_ne!(dup, fd);
    drop(h);
    let link = std::fs::read_link(format!("/proc/self/fd/{dup}")).unwrap();
    assert!(link.ends_with("status"), "{link:?}");
}

/// A process staged as a zone (python3): a unix listener that, told to, makes the
/// agent's copy of it linger — it queues a TCP socket with `SO_LINGER` of a day (a
/// connection to `peer`, which never reads, its buffers full) as `SCM_RIGHTS` on a
/// connection to the listener, then closes every descriptor of its own; the
/// listener's last close (the agent's) releases the socket in the closing thread,
/// which lingers until the peer goes. Killed when dropped.
struct Lingerer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    out: std::io::BufReader<std::process::ChildStdout>,
    pid: i32,
    watched: Watched,
}

impl Lingerer {
    fn start(path: &Path, peer: u16) -> Lingerer {
        use std::io::BufRead;
        let script = format!(
            "import socket, os, sys, struct, array\n\
            u = socket.socket(socket.AF_UNIX)\n\
            u.bind({path:?})\n\
            u.listen(8)\n\
            print(u.fileno(), os.fstat(u.fileno()).st_ino, flush=True)\n\
            sys.stdin.readline()\n\
            t = socket.socket()\n\
            t.connect(('127.0.0.1', {peer}))\n\
            t.setblocking(False)\n\
            try:\n\
            \x20   while True: t.send(b'x' * 65536)\n\
            except BlockingIOError: pass\n\
            t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 86400))\n\
            c = socket.socket(socket.AF_UNIX)\n\
            c.connect({path:?})\n\
            c.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [t.fileno()]))])\n\
            t.close(); c.close(); u.close()\n\
            print('lingering', flush=True)\n\
            sys.stdin.readline()\n",
            path = path.to_str().unwrap()
        );
        let mut child = match std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!("this test needs python3 on the host to stage the zone: {e}"),
        };
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take().unwrap();
        let pid = child.id() as i32;
        // From here the guard kills it, whatever fails.
        let mut z = Lingerer {
            child,
            stdin,
            out,
            pid,
            watched: Watched {
                inode: 0,
                kind: super::super::wake_diag::UNIX,
                held_by: (pid, -1),
            },
        };
        let mut line = String::new();
        z.out.read_line(&mut line).unwrap();
        let mut it = line.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        let (fd, ino) = (it.next().unwrap() as i32, it.next().unwrap() as u32);
        z.watched.inode = ino;
        z.watched.held_by = (pid, fd);
        z
    }

    /// Run again and make the copy linger (once told, it says so).
    fn linger(&mut self) {
        use std::io::{BufRead, Write};
        self.stdin.write_all(b"go\n").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "lingering", "the staged zone {}", self.pid);
    }
}

impl Drop for Lingerer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 19 review, finding 1: a zone that runs again can make the agent's close
/// of its copy wait ([`Lingerer`]). (The other way, `connect(AF_UNSPEC)` on the
/// listener and a connect to the peer, fails with EINVAL on this machine's
/// kernel.) Releasing must not wait: the close is a closer thread's.
#[test]
fn releasing_a_copy_the_zone_made_linger_never_waits() {
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let mut zone = Lingerer::start(&tmp.path().join("l.sock"), port);
    let pid = zone.pid;
    let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    let id = h
        .hold("lingerer", pid, &[zone.watched], &|| true, &|_| true)
        .unwrap();
    // The peer goes after 5 s (its reset ends any linger): without a closer thread
    // the release below would wait that long.
    let peer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(5));
        drop(peer);
    });
    // The zone "runs again" and makes the copy linger.
    zone.linger();
    let t = std::time::Instant::now();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    h.release_then(id, Box::new(move |held| tx.send(("halt", held)).unwrap()));
    // A second request for the same suspension, after the release: it too is
    // answered once the copy is closed.
    h.when_closed(pid, Box::new(move |held| tx2.send(("late", held)).unwrap()));
    let took = t.elapsed();
    // The copy lingers (the staging worked): no answer while it does.
    let early = rx.recv_timeout(Duration::from_millis(500));
    let mut answers = vec![
        rx.recv_timeout(Duration::from_secs(20)),
        rx.recv_timeout(Duration::from_secs(20)),
    ];
    answers.sort_by_key(|a| format!("{a:?}"));
    drop(h);
    drop(zone);
    peer.join().unwrap();
    assert!(
        took < Duration::from_secs(2),
        "releasing the copy waited {took:?} (its close lingered on the agent's thread)"
    );
    assert!(
        early.is_err(),
        "answered before the copy was closed: {early:?}"
    );
    assert_eq!(answers, [Ok(("halt", true)), Ok(("late", true))]);
    // Nothing in flight for it now: answered at once, nothing held.
    let (tx, rx) = mpsc::channel();
    let h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    h.when_closed(pid, Box::new(move |held| tx.send(held).unwrap()));
    assert_eq!(rx.try_recv(), Ok(false));
}

/// Third review, finding 2: more zones than there are closer threads make their
/// copies linger ([`Lingerer`]); each lingering closer is written off and replaced
/// as the agent's loop waits, each such zone is said and never held again, and
/// another zone's release is still closed and answered `true` while they all
/// linger (they do until the peer goes, at the end).
#[test]
fn lingering_copies_from_more_zones_than_closers_never_hold_up_another_zones_release() {
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let n = CLOSERS + 1;
    let mut zones: Vec<Lingerer> = (0..n)
        .map(|i| Lingerer::start(&tmp.path().join(format!("l{i}.sock")), port))
        .collect();
    let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
    let ids: Vec<u64> = zones
        .iter()
        .enumerate()
        .map(|(i, z)| {
            h.hold(
                &format!("linger{i}"),
                z.pid,
                &[z.watched],
                &|| true,
                &|_| true,
            )
            .unwrap()
        })
        .collect();
    let me = std::process::id() as i32;
    let (_quiet_listener, quiet) = own_listener();
    let qid = h.hold("quiet", me, &[quiet], &|| true, &|_| true).unwrap();
    for z in &mut zones {
        z.linger();
    }
    let (tx, rx) = mpsc::channel();
    for (i, id) in ids.iter().enumerate() {
        let tx = tx.clone();
        h.release_then(*id, Box::new(move |held| tx.send((i, held)).unwrap()));
    }
    // The agent's loop: lingering closes are found at each wait.
    let t = std::time::Instant::now();
    let mut lingered = Vec::new();
    while lingered.len() < n {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "only {lingered:?} found lingering in 30 s (closers in service and written off: {:?})",
            h.closers()
        );
        h.wait(Duration::from_millis(20)).unwrap();
        lingered.extend(h.take_lingered());
    }
    lingered.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("linger{i}")).collect();
    want.sort();
    assert_eq!(lingered, want, "each lingering zone said once");
    assert_eq!(h.closers().1, n, "each lingering closer written off");
    // Another zone's release is closed by a fresh thread and answered.
    let (qtx, qrx) = mpsc::channel();
    h.release_then(qid, Box::new(move |held| qtx.send(held).unwrap()));
    assert_eq!(
        qrx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the quiet zone's release waited behind the lingering closes (closers: {:?})",
        h.closers()
    );
    assert!(
        rx.try_recv().is_err(),
        "a lingering close returned already: the staging did not linger"
    );
    // A zone whose copy lingered is swept from now on, never held.
    let r = h.hold(
        "linger0",
        zones[0].pid,
        &[zones[0].watched],
        &|| true,
        &|_| true,
    );
    assert!(matches!(r, Err(NotHeld::Lingered)), "{r:?}");
    // The peer goes: every linger ends, each release is answered, and the
    // written-off threads end.
    drop(peer);
    for _ in 0..n {
        let r = rx.recv_timeout(Duration::from_secs(20));
        assert!(matches!(r, Ok((_, true))), "{r:?}");
    }
    let t = std::time::Instant::now();
    while h.closers().1 != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "written-off closers never ended: {:?}",
            h.closers()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
