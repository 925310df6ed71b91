//! Per-object locks: `flock(2)` on a file under `<root>/locks/`. Commands on the same
//! zone serialise; a lock is released when its holder exits, even by SIGKILL.
//!
//! Nobody waits in silence: a command that has waited [`NOTICE_AFTER`] for a lock says
//! whose it is and who holds it (found through `/proc/<pid>/fdinfo/<fd>`, whose `lock:`
//! lines list the locks of that open file: a process that merely has the file open,
//! another waiter, shows none), and the global `--wait S` ([`set_wait_limit`]) bounds
//! the wait with an error naming the holder. A flock belongs to an open file
//! description, so the holder is whoever has that description open now, which after a
//! crash may be a child that inherited it (issue 22, item 1: no helper of warren's may).

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::layout::Layout;

/// How long a command waits for a lock before it says who holds it.
pub const NOTICE_AFTER: Duration = Duration::from_secs(3);

/// `warren gc`'s bound on a shared lock's wait when `--wait` is not given.
pub const GC_WAIT: Duration = Duration::from_secs(60);

static WAIT_LIMIT: OnceLock<Duration> = OnceLock::new();

/// Set in a pipeline's worker: the pipeline's process, whose other workers contend
/// for the same locks (the id ranges' lock, a template's) as a matter of course.
static PIPELINE: OnceLock<i32> = OnceLock::new();

/// This process is a worker of the pipeline run by `parent` (`zone::pipeline`): a wait
/// for a lock that only the pipeline itself holds (`parent` or another of its workers)
/// is expected and not announced; a holder outside it still is.
pub fn in_pipeline_of(parent: i32) {
    let _ = PIPELINE.set(parent);
}

/// Whether this process's own pipeline (see [`in_pipeline_of`]) holds the lock on
/// `path`: one of the pipeline's processes — found through the `children` lists of
/// its parent, a few generations down — holds it. Only those processes' descriptors
/// are read: a scan of the whole host's (30,000 tasks beside a 10,000-zone fleet) takes
/// long enough that the holder it finds has often exited by the time it is named.
fn pipeline_holds(proc_root: &Path, path: &Path) -> bool {
    PIPELINE
        .get()
        .is_some_and(|parent| family_holds(proc_root, path, *parent))
}

/// Whether `parent` or one of its descendants, a few generations down (a pipeline's
/// worker, or a process a worker forked, e.g. a boot's child), holds the lock on `path`.
fn family_holds(proc_root: &Path, path: &Path, parent: i32) -> bool {
    let mut family = vec![parent];
    let mut generation = vec![parent];
    for _ in 0..4 {
        generation = generation
            .iter()
            .flat_map(|p| children(proc_root, *p))
            .collect();
        if generation.is_empty() {
            break;
        }
        family.extend(&generation);
    }
    !holders_among(proc_root, path, family).is_empty()
}

/// The children of every thread of `pid` (`/proc/<pid>/task/<tid>/children`).
fn children(proc_root: &Path, pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(proc_root.join(pid.to_string()).join("task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Bound every later lock wait of this process (`--wait S`); unset, waits are unbounded.
pub fn set_wait_limit(limit: Duration) {
    let _ = WAIT_LIMIT.set(limit);
}

/// A process holding a lock: pid and command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    pub command: String,
}

/// How much of a holder's command line a message shows (`warren boot` of 10,000 zones
/// names them all).
const COMMAND_SHOWN: usize = 120;

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.command.char_indices().nth(COMMAND_SHOWN) {
            Some((cut, _)) => write!(f, "pid {} ({} …)", self.pid, &self.command[..cut]),
            None => write!(f, "pid {} ({})", self.pid, self.command),
        }
    }
}

/// Whether one `/proc/<pid>/fdinfo/<fd>` text shows a lock held through that
/// descriptor (a `lock:` line that is not a waiter's `->` entry).
pub fn fdinfo_holds_lock(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .any(|l| l.starts_with("lock:") && !l.contains("->"))
}

/// The open file an fdinfo text describes: its mount's id and its inode (`mnt_id:` and
/// `ino:`, the latter since Linux 5.14).
fn fdinfo_file(fdinfo: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        fdinfo
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some((field("mnt_id:")?, field("ino:")?))
}

/// The device (`major:minor`) of mount `id` in a `mountinfo` text.
fn mount_device(mountinfo: &str, id: u64) -> Option<String> {
    mountinfo.lines().find_map(|l| {
        let mut f = l.split(' ');
        (f.next()?.parse::<u64>().ok()? == id).then(|| Some(f.nth(1)?.to_string()))?
    })
}

/// The processes that hold a lock on the file at `path`, scanning `<proc>/<pid>/fd/*`
/// and their fdinfo.
///
/// A descriptor is that file when its link names the same file name and its fdinfo the
/// same inode on the same mount (or on a mount of the same device, for a holder in
/// another mount namespace). Nothing here stats or opens a descriptor's target: a
/// process on this host — a zone's, say — may have a file of the same name open on a
/// FUSE mount it serves itself, and a stat through its link would then wait for that
/// server, frozen or hostile, for ever. Reading a link's text and fdinfo never calls
/// into the file's filesystem.
pub fn holders(proc_root: &Path, path: &Path) -> Vec<Holder> {
    let Ok(procs) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let pids = procs
        .flatten()
        .filter_map(|p| p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()));
    holders_among(proc_root, path, pids)
}

/// [`holders`] among the processes `pids`.
fn holders_among(
    proc_root: &Path,
    path: &Path,
    pids: impl IntoIterator<Item = i32>,
) -> Vec<Holder> {
    // Our own descriptor of the lock file tells its mount and inode the same way.
    let Some((mnt, ino)) = File::open(path).ok().and_then(|f| {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let own = std::fs::read_to_string(proc_root.join("self/fdinfo").join(fd.to_string()));
        own.ok().as_deref().and_then(fdinfo_file)
    }) else {
        return Vec::new();
    };
    let own_device = OnceLock::new();
    let same_file = |pid: &Path, fdinfo: &str| match fdinfo_file(fdinfo) {
        Some((m, i)) if i == ino && m == mnt => true,
        Some((m, i)) if i == ino => {
            let dev = |root: &Path, id| {
                let info = std::fs::read_to_string(root.join("mountinfo")).ok()?;
                mount_device(&info, id)
            };
            let own = own_device.get_or_init(|| dev(&proc_root.join("self"), mnt));
            own.is_some() && *own == dev(pid, m)
        }
        _ => false,
    };
    let mut out = Vec::new();
    for pid in pids {
        let dir = proc_root.join(pid.to_string());
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.file_name() == path.file_name())
                && std::fs::read_to_string(dir.join("fdinfo").join(fd.file_name()))
                    .is_ok_and(|t| same_file(&dir, &t) && fdinfo_holds_lock(&t))
        });
        if holds {
            let raw = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let command = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            let command = if command.is_empty() {
                std::fs::read_to_string(dir.join("comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_else(|_| "?".into())
            } else {
                command
            };
            out.push(Holder { pid, command });
        }
    }
    out
}

/// The holders, for a message: "pid 1234 (warren boot web1)".
pub fn describe(holders: &[Holder]) -> String {
    match holders {
        [] => "a process that could not be identified".into(),
        hs => hs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Take the lock on `file` (exclusive or shared), saying who holds it after
/// [`NOTICE_AFTER`] and giving up after the `--wait` limit. Until then it polls
/// (`LOCK_NB`, 1 ms doubling to 20 ms): a blocking `flock` could not be bounded or
/// interrupted to speak without a signal handler.
fn wait_for(file: &File, path: &Path, what: &str, shared: bool) -> Result<()> {
    let start = Instant::now();
    let mut noticed = false;
    let mut pause = Duration::from_millis(1);
    loop {
        let tried = if shared {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match tried {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).ctx(|| format!("locking {}", path.display()))
            }
        }
        let waited = start.elapsed();
        if let Some(limit) = WAIT_LIMIT.get().filter(|l| waited >= **l) {
            let holders = holders(Path::new("/proc"), path);
            return Err(Error::LockTimeout {
                what: what.to_string(),
                holder: describe(&holders),
                pids: holders.iter().map(|h| h.pid).collect(),
                waited_s: limit.as_secs_f64(),
                path: path.to_path_buf(),
            });
        }
        if !noticed && waited >= NOTICE_AFTER {
            noticed = true;
            // A pipeline's workers wait for each other as a matter of course: quiet.
            if !pipeline_holds(Path::new("/proc"), path) {
                let holders = holders(Path::new("/proc"), path);
                // Empty: the holder let go while we looked; nothing to say.
                if !holders.is_empty() {
                    eprintln!(
                        "warren: waiting for {what}'s lock, held by {} (bound the wait with --wait SECONDS)",
                        describe(&holders)
                    );
                }
            }
            if WAIT_LIMIT.get().is_none() {
                // Said; unbounded: queue in the kernel (no polling, no latency).
                let got = if shared {
                    file.lock_shared()
                } else {
                    file.lock()
                };
                return got.ctx(|| format!("locking {}", path.display()));
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

fn what(kind: &str, name: &str) -> String {
    match kind {
        "zone" | "template" => format!("{kind} {name}"),
        _ => format!("the {kind}-{name} lock file"),
    }
}

/// A held lock; released on drop.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Lock files are root's alone (0600, in a 0700 directory): a host user who could open
/// one could `flock` it and block warren forever.
fn open(path: &Path) -> Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let opts = || {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(warren_sys::libc::O_NOFOLLOW)
            .open(path)
    };
    let file = match opts() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .ctx(|| format!("restricting {} to root", dir.display()))?;
            }
            opts()
        }
        other => other,
    };
    // A lock path replaced by a directory: an empty one is taken away (nothing of
    // warren's is a directory there), anything else is the operator's to move.
    let file = match file {
        Err(e) if e.raw_os_error() == Some(warren_sys::libc::EISDIR) => {
            if std::fs::remove_dir(path).is_err() {
                return Err(Error::Corrupt {
                    path: path.to_path_buf(),
                    message: "a directory where warren's lock file should be".into(),
                });
            }
            opts()
        }
        other => other,
    };
    let file = file.ctx(|| format!("opening lock file {}", path.display()))?;
    // A lock file made by an older warren (0644) is tightened on first use.
    let meta = file
        .metadata()
        .ctx(|| format!("reading lock file {}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .ctx(|| format!("restricting lock file {} to root", path.display()))?;
    }
    Ok(file)
}

/// Take the exclusive lock of `kind`/`name`, waiting for other holders.
pub fn exclusive(layout: &Layout, kind: &str, name: &str) -> Result<Lock> {
    let path = layout.lock_file(kind, name);
    let file = open(&path)?;
    wait_for(&file, &path, &what(kind, name), false)?;
    Ok(Lock { _file: file })
}

/// Take the shared lock of `kind`/`name` (readers, e.g. the source of a clone).
pub fn shared(layout: &Layout, kind: &str, name: &str) -> Result<Lock> {
    let path = layout.lock_file(kind, name);
    let file = open(&path)?;
    wait_for(&file, &path, &what(kind, name), true)?;
    Ok(Lock { _file: file })
}

/// Take the exclusive lock on the lock file `path` if nobody holds it; `None` if held.
pub fn try_exclusive_path(path: &Path) -> Result<Option<Lock>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Lock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).ctx(|| format!("locking {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_lock_lines_tell_holders_from_waiters() {
        let held = "pos:\t0\nflags:\t02100001\nmnt_id:\t30\nino:\t42\nlock:\t1: FLOCK  ADVISORY  WRITE 1234 08:01:42 0 EOF\n";
        let waiting = "pos:\t0\nflags:\t02100001\nmnt_id:\t30\nino:\t42\n";
        let blocked = "lock:\t1: -> FLOCK  ADVISORY  WRITE 99 08:01:42 0 EOF\n";
        assert!(fdinfo_holds_lock(held));
        assert!(!fdinfo_holds_lock(waiting));
        assert!(!fdinfo_holds_lock(blocked));
    }

    #[test]
    fn fdinfo_and_mountinfo_name_a_descriptors_file() {
        let info = "pos:\t0\nflags:\t02100001\nmnt_id:\t30\nino:\t42\nlock:\t1: FLOCK  ADVISORY  WRITE 1234 08:01:42 0 EOF\n";
        assert_eq!(fdinfo_file(info), Some((30, 42)));
        // Before Linux 5.14 fdinfo has no inode: such a descriptor is never a match.
        assert_eq!(fdinfo_file("pos:\t0\nflags:\t02\nmnt_id:\t30\n"), None);
        let mounts = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
                      30 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n";
        assert_eq!(mount_device(mounts, 30).as_deref(), Some("8:1"));
        assert_eq!(mount_device(mounts, 3), None);
    }

    #[test]
    fn a_lock_on_another_file_of_the_same_name_is_not_a_holder() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("other")).unwrap();
        let ours = d.path().join("zone-x.lock");
        let theirs = d.path().join("other/zone-x.lock");
        let _ours = open(&ours).unwrap();
        let f = open(&theirs).unwrap();
        f.lock().unwrap();
        assert!(holders(Path::new("/proc"), &ours).is_empty());
        assert_eq!(holders(Path::new("/proc"), &theirs).len(), 1);
    }

    #[test]
    fn a_holder_in_another_mount_namespace_is_named() {
        // The lock file reached through a copy of the mount (another mount id, same
        // device): `unshare -m` runs `flock` in a new mount namespace (root, as the
        // suite runs).
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("zone-y.lock");
        drop(open(&path).unwrap());
        let mut child = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "flock", "--no-fork"])
            .arg(&path)
            .args(["sh", "-c", "echo locked; exec sleep 60"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("unshare and flock (util-linux)");
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut out = child.stdout.take().unwrap();
        let child = Kill(child);
        let mut line = [0u8; 7];
        std::io::Read::read_exact(&mut out, &mut line)
            .expect("unshare -m flock printed nothing: it needs root");
        assert_eq!(&line, b"locked\n");
        let hs = holders(Path::new("/proc"), &path);
        // `flock --no-fork` execs the shell, which execs sleep: one process.
        let pids: Vec<i32> = hs.iter().map(|h| h.pid).collect();
        assert_eq!(pids, [child.0.id() as i32], "{hs:?}");
    }

    #[test]
    fn a_long_command_line_is_cut_in_messages() {
        let long = Holder {
            pid: 7,
            command: format!("warren boot {}", vec!["z1"; 5000].join(" ")),
        };
        let shown = long.to_string();
        assert!(shown.starts_with("pid 7 (warren boot z1 z1"), "{shown}");
        assert!(shown.ends_with(" …)") && shown.len() < 140, "{shown}");
        let short = Holder {
            pid: 8,
            command: "warren halt a".into(),
        };
        assert_eq!(short.to_string(), "pid 8 (warren halt a)");
        // Cut between characters, never inside one.
        let wide = Holder {
            pid: 9,
            command: "é".repeat(200),
        };
        let shown = wide.to_string();
        assert!(
            shown.starts_with(&format!("pid 9 ({}", "é".repeat(120))),
            "{shown}"
        );
        assert!(!shown.contains(&"é".repeat(121)), "{shown}");
    }

    #[test]
    fn holders_names_this_process_for_a_lock_it_holds() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("zone-x.lock");
        let f = open(&path).unwrap();
        f.lock().unwrap();
        let hs = holders(Path::new("/proc"), &path);
        let me = warren_sys::getpid();
        assert!(hs.iter().any(|h| h.pid == me), "{hs:?}");
        let other = open(&path).unwrap();
        assert!(other.try_lock().is_err());
        drop(f);
        assert!(holders(Path::new("/proc"), &path).is_empty());
    }

    #[test]
    fn a_lock_held_in_the_family_is_the_pipelines_and_one_held_outside_is_not() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("userns-ranges.lock");
        drop(open(&path).unwrap());
        let proc_root = Path::new("/proc");
        let me = warren_sys::getpid();
        struct Kill(i32);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = warren_sys::proc::kill(self.0, 9);
            }
        }
        let wait_held = |why: &str| {
            for _ in 0..500 {
                if !holders(proc_root, &path).is_empty() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("{why}: flock never took {}", path.display());
        };
        // A child of this process (a worker of a pipeline whose parent is this one).
        let mut child = std::process::Command::new("flock")
            .arg("--no-fork")
            .arg(&path)
            .args(["sleep", "60"])
            .spawn()
            .expect("flock (util-linux)");
        let _kill = Kill(child.id() as i32);
        wait_held("child");
        assert!(family_holds(proc_root, &path, me));
        child.kill().unwrap();
        child.wait().unwrap();
        // An orphan: its shell exited, so it is no descendant of this process.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "flock --no-fork '{}' sleep 60 >/dev/null 2>&1 & echo $!",
                path.display()
            ))
            .output()
            .unwrap();
        let orphan: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let _kill = Kill(orphan);
        wait_held("orphan");
        assert!(!family_holds(proc_root, &path, me));
        assert_eq!(holders(proc_root, &path)[0].pid, orphan);
    }
}
