//! The agent's view of the zones' records, read again only where they changed.
//!
//! The agent reads every zone's records on its re-reads of the suspended zones (every
//! `wake-scan-s`), for its idle policy and before an eviction. A full read is about
//! seven files and three parses a zone; at 10,000 zones that took seconds, longer than
//! a tick, so the agent did little else (its held zones' wait was starved, docs/
//! suspend.md). What a zone's read yields depends only on its three files
//! (`config.toml`, `state.json`, `runtime.json`: each replaced by a rename when it
//! changes) and on whether the init they record is still the same process: so each
//! zone's result is kept with the files' identity (inode, size, modification time) and
//! the init's fact, and read again only when one of them differs — three `lstat`s and
//! one `/proc/<pid>/stat` read a zone.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::state::{InitFact, InitId};
use crate::zone::Context;

/// The files a zone's read depends on.
const FILES: [&str; 3] = ["config.toml", "state.json", "runtime.json"];

/// One file's identity: inode, size, modification time (seconds, nanoseconds).
type FileStamp = Option<(u64, u64, i64, i64)>;

/// The identity of a zone's files (a missing file is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp([FileStamp; 3]);

impl Stamp {
    fn of(dir: &Path) -> Stamp {
        Stamp(FILES.map(|f| {
            let m = std::fs::symlink_metadata(dir.join(f)).ok()?;
            Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
        }))
    }
}

struct Entry<T> {
    stamp: Stamp,
    init: Option<InitId>,
    fact: Option<InitFact>,
    value: T,
}

/// What the agent made of each zone's records, by zone name.
pub struct Seen<T> {
    zones: HashMap<String, Entry<T>>,
}

impl<T: Clone> Seen<T> {
    pub fn new() -> Seen<T> {
        Seen {
            zones: HashMap::new(),
        }
    }

    /// Zone `name`'s value: kept if its files and its init's fact are what they were
    /// when it was read, else `read()` (the value, the init its records name and the
    /// fact the value was made with). The files are looked at before they are read,
    /// and the fact is the one the value was made from, so a change during the read
    /// shows as a difference next time.
    pub fn get(
        &mut self,
        ctx: &Context,
        name: &str,
        read: impl FnOnce() -> (T, Option<InitId>, Option<InitFact>),
    ) -> T {
        let stamp = Stamp::of(&ctx.layout.zone_dir(name));
        if let Some(e) = self.zones.get(name) {
            if e.stamp == stamp && fact(ctx, e.init) == e.fact {
                return e.value.clone();
            }
        }
        let (value, init, fact) = read();
        let e = Entry {
            stamp,
            init,
            fact,
            value: value.clone(),
        };
        self.zones.insert(name.to_string(), e);
        value
    }

    /// Forget the zones not in `names` (deleted).
    pub fn keep_only(&mut self, names: &[String]) {
        let names: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        self.zones.retain(|n, _| names.contains(n.as_str()));
    }
}

/// What the kernel says about `init` now.
fn fact(ctx: &Context, init: Option<InitId>) -> Option<InitFact> {
    init.map(|i| ctx.fact_of(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{HostPaths, Layout};

    #[test]
    fn a_zone_is_read_again_only_when_its_files_or_its_init_change() {
        let d = tempfile::tempdir().unwrap();
        let ctx = Context::new(Layout::new(d.path()), HostPaths::default());
        let dir = ctx.layout.zone_dir("web");
        std::fs::create_dir_all(&dir).unwrap();
        for f in FILES {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        let mut seen: Seen<u32> = Seen::new();
        let mut reads = 0;
        // This test process as the zone's init: alive while the test runs.
        let me = warren_sys::getpid();
        let start = crate::stats::proc_start_time(Path::new("/proc"), me).unwrap();
        let alive = Some(InitId {
            pid: me,
            start_time: start,
        });
        let mut get = |seen: &mut Seen<u32>, init: Option<InitId>| {
            seen.get(&ctx, "web", || {
                reads += 1;
                (reads, init, init.map(|i| ctx.fact_of(i)))
            })
        };
        assert_eq!(get(&mut seen, alive), 1);
        assert_eq!(get(&mut seen, alive), 1, "nothing changed: kept");
        // A record replaced by a rename (a new inode), as warren writes them.
        std::fs::write(dir.join("runtime.json.tmp"), "y").unwrap();
        std::fs::rename(dir.join("runtime.json.tmp"), dir.join("runtime.json")).unwrap();
        assert_eq!(get(&mut seen, alive), 2);
        assert_eq!(get(&mut seen, alive), 2);
        std::fs::remove_file(dir.join("state.json")).unwrap();
        assert_eq!(get(&mut seen, alive), 3, "a file gone");
        // The recorded init exits: read again, once.
        struct Reap(std::process::Child);
        impl Drop for Reap {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = Reap(
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id() as i32;
        let child_init = Some(InitId {
            pid,
            start_time: crate::stats::proc_start_time(Path::new("/proc"), pid).unwrap(),
        });
        std::fs::write(dir.join("state.json"), "booted").unwrap();
        assert_eq!(get(&mut seen, child_init), 4);
        assert_eq!(get(&mut seen, child_init), 4);
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        assert_eq!(get(&mut seen, child_init), 5, "its init exited");
        assert_eq!(get(&mut seen, child_init), 5, "gone, and still gone: kept");
        seen.keep_only(&[]);
        assert_eq!(
            get(&mut seen, child_init),
            6,
            "forgotten when the zone is not listed"
        );
    }
}
