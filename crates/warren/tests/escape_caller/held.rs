//! What a careless caller holds open when it runs warren (classes 1 and 10), and the
//! listing that shows whether any of it reached a process.

use super::*;

/// Objects the "careless caller" holds without close-on-exec: a host directory (with a
/// secret file), a host file, a socket, a pipe. Each is kept at a high descriptor
/// (close-on-exec, so no other child of this test gets it) and placed at its target
/// number only in the child that runs warren.
pub(crate) struct Held {
    pub(crate) dir: tempfile::TempDir,
    map: Vec<(RawFd, OwnedFd)>,
    /// dev:ino of every held object, as stat(2) through /proc/self/fd shows them.
    pub(crate) ids: Vec<String>,
}

pub(crate) fn dup_high(fd: RawFd) -> OwnedFd {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor this process owns returns a new one.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 300) };
    assert!(
        n >= 300,
        "F_DUPFD_CLOEXEC: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `n` was just returned by fcntl and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(n) }
}

pub(crate) fn dev_ino(fd: RawFd) -> String {
    let m = std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
    format!("{}:{}", m.dev(), m.ino())
}

impl Held {
    /// The standard set on 7 (dir), 8 (file), 9 (socket), 10 (pipe), 200 (dir again),
    /// plus `extra` (target, object) pairs.
    pub(crate) fn new(extra: Vec<(RawFd, OwnedFd)>) -> Held {
        let dir = scratch("warren-caller-");
        std::fs::write(dir.path().join("secret"), "host-secret-2f9c\n").unwrap();
        let d = File::open(dir.path()).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("secret"))
            .unwrap();
        let (s1, s2) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut p = [0; 2];
        // SAFETY: `p` has room for two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 returned two new descriptors owned by nobody else.
        let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let mut map = vec![
            (7, dup_high(d.as_raw_fd())),
            (8, dup_high(f.as_raw_fd())),
            (9, dup_high(s1.as_raw_fd())),
            (10, dup_high(pr.as_raw_fd())),
            (200, dup_high(d.as_raw_fd())),
        ];
        // Keep the socket's peer and the pipe's write end open for the test's life.
        map.push((-1, dup_high(s2.as_raw_fd())));
        map.push((-1, dup_high(pw.as_raw_fd())));
        map.extend(extra);
        let ids = map.iter().map(|(_, o)| dev_ino(o.as_raw_fd())).collect();
        Held { dir, map, ids }
    }

    /// Place the held objects at their numbers (without close-on-exec) in `cmd`'s child
    /// and run it from the host directory.
    pub(crate) fn give(&self, cmd: &mut Command) {
        let pairs: Vec<(RawFd, RawFd)> = self
            .map
            .iter()
            .filter(|(t, _)| *t >= 0)
            .map(|(t, o)| (o.as_raw_fd(), *t))
            .collect();
        cmd.current_dir(self.dir.path());
        // SAFETY: the closure runs in the forked child before exec and only calls
        // dup2, which is async-signal-safe; `pairs` was allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for &(src, target) in &pairs {
                    if libc::dup2(src, target) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    pub(crate) fn targets(&self) -> Vec<RawFd> {
        self.map
            .iter()
            .filter(|(t, _)| *t >= 0)
            .map(|(t, _)| *t)
            .collect()
    }
}

/// Lists the descriptors of `/proc/<argv[1]>` ("self" for its own) as
/// `n link dev:ino` lines; a descriptor gone by the time it is read (the listing's
/// own) shows as `gone`.
pub(crate) const FD_LIST: &str = r#"
import os, sys
pid = sys.argv[1] if sys.argv[1] != "self" else str(os.getpid())
d = "/proc/%s/fd" % pid
for n in sorted(os.listdir(d), key=int):
    p = d + "/" + n
    try:
        l = os.readlink(p)
    except OSError:
        print(n, "gone", "-")
        continue
    try:
        s = os.stat(p)
        i = "%d:%d" % (s.st_dev, s.st_ino)
    except OSError:
        i = "-"
    print(n, l.replace(" ", "_"), i)
"#;

/// Judge an `n link dev:ino` listing (or `ls -l` lines, parsed to `n link`): every
/// descriptor past 2 must be the listing's own or a /proc handle of the process
/// itself, and none may be one of the caller's objects.
pub(crate) fn fds_clean(listing: &str, held: &Held) -> (bool, String) {
    let mut extra = Vec::new();
    let mut numbers = Vec::new();
    let mut ok = true;
    for line in listing.lines() {
        let words: Vec<&str> = if line.contains(" -> ") {
            // `ls -l` (busybox or coreutils): "... N -> target"
            let (left, target) = line.split_once(" -> ").unwrap();
            match left.split_whitespace().last() {
                Some(n) => vec![n, target.trim()],
                None => continue,
            }
        } else {
            line.split_whitespace().collect()
        };
        let Some(n) = words.first().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        numbers.push(n);
        if n <= 2 {
            continue;
        }
        let link = words.get(1).copied().unwrap_or("");
        let id = words.get(2).copied().unwrap_or("-");
        let own_proc = link
            .strip_prefix("/proc/")
            .map(|r| {
                let r = r.strip_suffix("/fd").unwrap_or(r);
                !r.is_empty() && r.chars().all(|c| c.is_ascii_digit())
            })
            .unwrap_or(false);
        let caller = held.ids.iter().any(|i| i == id);
        if caller || !(link == "gone" || own_proc) {
            ok = false;
        }
        extra.push(format!("{n}->{link}"));
    }
    if numbers.is_empty() {
        return (false, format!("no listing: {listing}"));
    }
    (ok, format!("fds {numbers:?} beyond stdio: {extra:?}"))
}
