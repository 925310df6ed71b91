//! A container's cgroup figures as containerd's metrics types: the cgroup v1
//! `io.containerd.cgroups.v1.Metrics` or the v2 `io.containerd.cgroups.v2.Metrics`,
//! whichever driver holds the container (what `ctr task metrics` and the CRI's
//! ContainerStats decode).

use containerd_shim::protos::cgroups::metrics as v1;
use containerd_shim::protos::cgroups_v2::metrics as v2;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Message, MessageField};
use warren::cgroups::{CgroupSet, CgroupVersion};

/// A limit file's value; `max` (no limit) and anything unreadable are 0, as runc's.
fn limit(set: &CgroupSet, controller: &str, file: &str) -> u64 {
    set.read(controller, file)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `m` as an `Any` of type `type_url` (packed by hand: no protobuf descriptors).
fn pack(type_url: &str, m: &impl Message) -> containerd_shim::Result<Any> {
    Ok(Any {
        type_url: type_url.into(),
        value: m.write_to_bytes()?,
        ..Default::default()
    })
}

/// The metrics of the container whose cgroups are `set`, packed as containerd wants.
pub fn of(set: &CgroupSet) -> containerd_shim::Result<Any> {
    let pids = (set.tasks().unwrap_or(0), limit(set, "pids", "pids.max"));
    let memory = set.memory_bytes().unwrap_or(0);
    let cpu_ns = set.cpu_ns().unwrap_or(0);
    match set.version {
        CgroupVersion::V1 => {
            let m = v1::Metrics {
                pids: MessageField::some(v1::PidsStat {
                    current: pids.0,
                    limit: pids.1,
                    ..Default::default()
                }),
                cpu: MessageField::some(v1::CPUStat {
                    usage: MessageField::some(v1::CPUUsage {
                        total: cpu_ns,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                memory: MessageField::some(v1::MemoryStat {
                    usage: MessageField::some(v1::MemoryEntry {
                        usage: memory,
                        limit: limit(set, "memory", "memory.limit_in_bytes"),
                        max: limit(set, "memory", "memory.max_usage_in_bytes"),
                        failcnt: limit(set, "memory", "memory.failcnt"),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            pack("io.containerd.cgroups.v1.Metrics", &m)
        }
        CgroupVersion::V2 => {
            let m = v2::Metrics {
                pids: MessageField::some(v2::PidsStat {
                    current: pids.0,
                    limit: pids.1,
                    ..Default::default()
                }),
                cpu: MessageField::some(v2::CPUStat {
                    usage_usec: cpu_ns / 1000,
                    ..Default::default()
                }),
                memory: MessageField::some(v2::MemoryStat {
                    usage: memory,
                    usage_limit: limit(set, "memory", "memory.max"),
                    ..Default::default()
                }),
                ..Default::default()
            };
            pack("io.containerd.cgroups.v2.Metrics", &m)
        }
    }
}
