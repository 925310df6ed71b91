//! Live `TaskOOM`: one task on the shim's runtime watches the memory cgroups of all
//! its containers and tells the service when the kernel's OOM killer acted in one
//! while the container runs (a child killed, the init living on), as runc's shim
//! does.
//!
//! One epoll holds every source, itself watched by the runtime, so a pod's shim
//! pays no thread for them:
//!
//! - cgroup v1: an eventfd per container registered on `memory.oom_control` through
//!   `cgroup.event_control`; the kernel signals it when the cgroup hits its limit
//!   and the OOM killer runs (just before the kill is counted), and once more when
//!   the cgroup is removed.
//! - cgroup v2: one inotify instance, a watch on each container's `memory.events`,
//!   which the kernel modifies on every memory event; its `oom_kill` count says
//!   whether one was a kill.
//!
//! The watcher only names the container ([`Event`]); the service decides with
//! [`decide`] under its table's lock, against the count of TaskOOM already
//! published for it, so the check at the init's exit (kept: it covers an OOM kill
//! of the init itself and a notification lost to a race) never repeats one.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use warren::cgroups::{CgroupSet, CgroupVersion};
use warren_sys::notify::{self, Epoll, Inotify};

/// The inotify instance's token in the epoll (containers' tokens start above).
const INOTIFY: u64 = 0;

/// What the watcher saw for a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// v1: the cgroup's OOM notification (or its removal) fired.
    OomNotified,
    /// v2: `memory.events` changed (any memory event, maybe an OOM kill).
    EventsChanged,
}

/// Whether to publish a TaskOOM, given what was seen and what was published: the
/// new published count if so. `kills` is the cgroup's `oom_kill` count now (None:
/// the cgroup is gone); `running`: the container's init has not exited.
///
/// v1 notifies before the kill is counted, so a notification while the container
/// runs and its cgroup exists is one OOM (the count is raised to at least it); the
/// removal's notification finds no cgroup. v2 and the exit check compare counts.
pub fn decide(
    event: Option<Event>,
    kills: Option<u64>,
    published: u64,
    running: bool,
) -> Option<u64> {
    let kills = kills?;
    match event {
        Some(Event::OomNotified) if running => Some((published + 1).max(kills)),
        Some(Event::OomNotified) => None,
        Some(Event::EventsChanged) | None => (kills > published).then_some(kills),
    }
}

/// The memory cgroup files of a container the watcher reads.
pub fn memory_dir(set: &CgroupSet) -> Option<PathBuf> {
    set.dir_with("memory").map(Path::to_path_buf)
}

enum Source {
    /// v1: the registered eventfd (closing it ends the registration's use).
    EventFd(OwnedFd),
    /// v2: the inotify watch descriptor.
    Watch(i32),
}

struct Watched {
    container_id: String,
    source: Source,
}

/// The shim's watcher: sources added at create, removed at delete.
pub struct Watcher {
    epoll: Epoll,
    inotify: Inotify,
    watched: Mutex<HashMap<u64, Watched>>,
    next: AtomicU64,
}

impl AsRawFd for Watcher {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_fd().as_raw_fd()
    }
}

impl Watcher {
    /// A watcher with no source yet; [`Watcher::watch`] runs it.
    pub fn new() -> std::io::Result<Arc<Watcher>> {
        let w = Arc::new(Watcher {
            epoll: Epoll::new()?,
            inotify: Inotify::new()?,
            watched: Mutex::new(HashMap::new()),
            next: AtomicU64::new(INOTIFY + 1),
        });
        w.epoll.add(w.inotify.as_fd(), notify::IN, INOTIFY)?;
        Ok(w)
    }

    /// Call `on_event(container_id, event)` for each notification, for ever: a task
    /// of the server's runtime, woken when the epoll has events.
    pub async fn watch(self: Arc<Self>, on_event: impl Fn(&str, Event)) {
        let stop = |e: std::io::Error| {
            log::error!("the OOM watcher's epoll: {e}; live TaskOOM stops (the exit check remains)")
        };
        // tokio deprecates its safe constructors for descriptors that could close
        // while registered (its replacement is `unsafe`, which this crate forbids).
        // This one cannot: the watcher, held here, owns the epoll, and its
        // `as_raw_fd` always names it.
        #[allow(deprecated)]
        let ready = AsyncFd::with_interest(self.clone(), Interest::READABLE);
        let ready = match ready {
            Ok(r) => r,
            Err(e) => return stop(e),
        };
        loop {
            let mut guard = match ready.readable().await {
                Ok(g) => g,
                Err(e) => return stop(e),
            };
            // The runtime's wake-up is edge-triggered: take every event before
            // waiting again.
            loop {
                let tokens = match self.epoll.wait(Some(std::time::Duration::ZERO)) {
                    Ok(t) => t,
                    Err(e) => return stop(e),
                };
                if tokens.is_empty() {
                    guard.clear_ready();
                    break;
                }
                // Outside the watcher's lock: the service takes its own.
                for (id, event) in self.seen(tokens) {
                    on_event(&id, event);
                }
                // A source that stays ready (one the kernel keeps touching, one whose
                // read fails) must not keep the calls from the runtime's thread.
                tokio::task::yield_now().await;
            }
        }
    }

    /// The containers and events behind the epoll's `tokens`.
    fn seen(&self, tokens: Vec<u64>) -> Vec<(String, Event)> {
        let mut seen = Vec::new();
        let watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        for token in tokens {
            if token == INOTIFY {
                let wds = self.inotify.read_events().unwrap_or_default();
                for w in watched.values() {
                    if matches!(w.source, Source::Watch(wd) if wds.contains(&wd)) {
                        seen.push((w.container_id.clone(), Event::EventsChanged));
                    }
                }
            } else if let Some(w) = watched.get(&token) {
                if let Source::EventFd(fd) = &w.source {
                    if notify::eventfd_take(fd.as_fd()).unwrap_or(0) > 0 {
                        seen.push((w.container_id.clone(), Event::OomNotified));
                    }
                }
            }
        }
        seen
    }

    /// Watch the memory cgroup of `container_id` (`set`, as create made it).
    pub fn add(&self, container_id: &str, set: &CgroupSet) -> std::io::Result<()> {
        let Some(dir) = memory_dir(set) else {
            return Ok(());
        };
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let source = match set.version {
            CgroupVersion::V1 => {
                use std::os::fd::AsRawFd;
                let efd = notify::eventfd()?;
                let control = std::fs::File::open(dir.join("memory.oom_control"))?;
                // "<event fd> <file fd>": the kernel takes both by number from this
                // process and keeps the eventfd's context; the file may close after.
                std::fs::write(
                    dir.join("cgroup.event_control"),
                    format!("{} {}", efd.as_raw_fd(), control.as_raw_fd()),
                )?;
                self.epoll.add(efd.as_fd(), notify::IN, token)?;
                Source::EventFd(efd)
            }
            CgroupVersion::V2 => {
                let wd = self
                    .inotify
                    .add_watch(&dir.join("memory.events"), notify::IN_MODIFY)?;
                Source::Watch(wd)
            }
        };
        self.watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                token,
                Watched {
                    container_id: container_id.into(),
                    source,
                },
            );
        Ok(())
    }

    /// Stop watching `container_id` (before its cgroup is removed).
    pub fn remove(&self, container_id: &str) {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        let tokens: Vec<u64> = watched
            .iter()
            .filter(|(_, w)| w.container_id == container_id)
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            match watched.remove(&t).map(|w| w.source) {
                Some(Source::EventFd(fd)) => {
                    let _ = self.epoll.remove(fd.as_fd());
                }
                Some(Source::Watch(wd)) => {
                    let _ = self.inotify.rm_watch(wd);
                }
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_notification_while_running_is_one_oom() {
        // The kill is not counted yet when v1 notifies.
        assert_eq!(decide(Some(Event::OomNotified), Some(0), 0, true), Some(1));
        assert_eq!(decide(Some(Event::OomNotified), Some(1), 1, true), Some(2));
        // Counted already (a late wake-up): at least the count.
        assert_eq!(decide(Some(Event::OomNotified), Some(3), 0, true), Some(3));
    }

    #[test]
    fn a_v1_notification_after_the_exit_or_the_cgroup_is_not() {
        // The exit's check published it (or there was none).
        assert_eq!(decide(Some(Event::OomNotified), Some(1), 1, false), None);
        // The cgroup's removal notifies too.
        assert_eq!(decide(Some(Event::OomNotified), None, 0, true), None);
    }

    #[test]
    fn v2_and_the_exit_compare_kill_counts() {
        assert_eq!(decide(Some(Event::EventsChanged), Some(0), 0, true), None);
        assert_eq!(
            decide(Some(Event::EventsChanged), Some(2), 1, true),
            Some(2)
        );
        assert_eq!(decide(Some(Event::EventsChanged), Some(1), 1, false), None);
        // At the exit: a kill not yet published (the init itself) goes out once.
        assert_eq!(decide(None, Some(1), 0, false), Some(1));
        assert_eq!(decide(None, Some(1), 1, false), None);
        assert_eq!(decide(None, None, 0, false), None);
    }
}
