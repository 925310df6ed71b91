//! Which limit stopped a probe: a pure function of the kernel's errno and the counters
//! read right after the first failure.

use serde::Serialize;
use warren_sys::libc;

/// What stopped the probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum Stop {
    /// It created `--max` tasks; nothing stopped it.
    Reached,
    /// The probe cgroup's own pids.max.
    CgroupCap {
        pids_max: u64,
    },
    /// A pids.max of a cgroup above the probe's.
    AncestorCgroup,
    PidMax {
        pid_max: u64,
        tasks: u64,
    },
    ThreadsMax {
        threads_max: u64,
        tasks: u64,
    },
    RlimitNproc {
        soft: u64,
    },
    Memory,
    /// An error none of the above explains.
    Other {
        errno: i32,
    },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Reached => write!(f, "no limit (reached --max)"),
            Stop::CgroupCap { pids_max } => write!(
                f,
                "the probe cgroup's pids.max ({pids_max}; the probe process itself is one of those tasks)"
            ),
            Stop::AncestorCgroup => write!(f, "a pids.max of a cgroup above warren's"),
            Stop::PidMax { pid_max, tasks } => {
                write!(f, "kernel.pid_max ({pid_max}; {tasks} tasks on the host)")
            }
            Stop::ThreadsMax { threads_max, tasks } => write!(
                f,
                "kernel.threads-max ({threads_max}; {tasks} tasks on the host)"
            ),
            Stop::RlimitNproc { soft } => write!(f, "RLIMIT_NPROC ({soft})"),
            Stop::Memory => write!(f, "memory (ENOMEM)"),
            Stop::Other { errno } => write!(
                f,
                "an unexplained error: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// The counters read right after the probe's first failure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopFacts {
    /// 0 when the probe reached `--max`.
    pub errno: i32,
    /// The probe cgroup's pids.max.
    pub cap: u64,
    /// Its pids.events "max" counter (fork failures charged to it).
    pub events_max: u64,
    /// Its pids.current.
    pub probe_tasks: u64,
    pub host_tasks: Option<u64>,
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
    pub nproc_soft: Option<u64>,
    pub euid: u32,
}

/// pids below this are reserved for the kernel after pid_max wraps (RESERVED_PIDS).
const RESERVED_PIDS: u64 = 300;

/// Which limit stopped the probe. Pure.
pub fn attribute(f: &StopFacts) -> Stop {
    if f.errno == 0 {
        return Stop::Reached;
    }
    if f.events_max > 0 {
        return if f.probe_tasks >= f.cap {
            Stop::CgroupCap { pids_max: f.cap }
        } else {
            Stop::AncestorCgroup
        };
    }
    if f.errno == libc::ENOMEM {
        return Stop::Memory;
    }
    if f.errno == libc::EAGAIN {
        if let (Some(tasks), Some(max)) = (f.host_tasks, f.threads_max) {
            if tasks + 16 >= max {
                return Stop::ThreadsMax {
                    threads_max: max,
                    tasks,
                };
            }
        }
        if let (Some(tasks), Some(max)) = (f.host_tasks, f.pid_max) {
            if tasks + RESERVED_PIDS + 64 >= max {
                return Stop::PidMax {
                    pid_max: max,
                    tasks,
                };
            }
        }
        if let (Some(soft), true) = (f.nproc_soft, f.euid != 0) {
            return Stop::RlimitNproc { soft };
        }
    }
    Stop::Other { errno: f.errno }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> StopFacts {
        StopFacts {
            errno: libc::EAGAIN,
            cap: 300,
            events_max: 0,
            probe_tasks: 100,
            host_tasks: Some(500),
            pid_max: Some(32768),
            threads_max: Some(192_724),
            nproc_soft: Some(96362),
            euid: 0,
        }
    }

    #[test]
    fn attribution() {
        let reached = StopFacts {
            errno: 0,
            ..facts()
        };
        assert_eq!(attribute(&reached), Stop::Reached);
        let capped = StopFacts {
            events_max: 1,
            probe_tasks: 300,
            ..facts()
        };
        assert_eq!(attribute(&capped), Stop::CgroupCap { pids_max: 300 });
        let above = StopFacts {
            events_max: 1,
            ..facts()
        };
        assert_eq!(attribute(&above), Stop::AncestorCgroup);
        let pids = StopFacts {
            host_tasks: Some(32_500),
            ..facts()
        };
        assert_eq!(
            attribute(&pids),
            Stop::PidMax {
                pid_max: 32768,
                tasks: 32_500
            }
        );
        let threads = StopFacts {
            host_tasks: Some(192_720),
            pid_max: Some(4_194_304),
            ..facts()
        };
        assert!(matches!(attribute(&threads), Stop::ThreadsMax { .. }));
        // Root is exempt from RLIMIT_NPROC; another user is not.
        assert_eq!(
            attribute(&facts()),
            Stop::Other {
                errno: libc::EAGAIN
            }
        );
        let user = StopFacts {
            euid: 1000,
            ..facts()
        };
        assert_eq!(attribute(&user), Stop::RlimitNproc { soft: 96362 });
        let oom = StopFacts {
            errno: libc::ENOMEM,
            ..facts()
        };
        assert_eq!(attribute(&oom), Stop::Memory);
        assert!(Stop::CgroupCap { pids_max: 300 }
            .to_string()
            .contains("probe process itself"));
    }
}
