//! Runtime records that cannot be trusted: one that is torn (empty, truncated,
//! garbled) or that is not the zone's own (it names another zone's cgroups, as a
//! copied zone directory does, or another zone's init) is stale, and the zone's
//! cgroups are then found by its name, not by the record ([`clean_by_name`]).

use std::fs;

use super::Context;
use crate::error::Result;
use crate::state::{InitFact, Runtime};

/// Why a runtime record is not zone `name`'s own, or `None`: its cgroups are named
/// after another zone, or its init (alive, start time matching) sits in another zone's
/// cgroup of this state root. Conservative: an init whose cgroups cannot be read or
/// name no zone of this root is not called foreign (a wrong verdict would have the
/// zone's own cgroups cleaned as stale).
pub(super) fn foreign_record(ctx: &Context, name: &str, rt: &Runtime) -> Option<String> {
    if let Some((_, other)) = rt
        .cgroups
        .dirs
        .iter()
        .find(|(_, d)| d.file_name() != Some(std::ffi::OsStr::new(name)))
    {
        return Some(format!(
            "it names cgroup {}, which is not zone '{name}''s (a copied zone directory?); ignored",
            other.display()
        ));
    }
    let init = rt.init?;
    if ctx.init_fact(rt) != Some(InitFact::Alive) {
        return None;
    }
    let path = ctx.host.proc.join(init.pid.to_string()).join("cgroup");
    let text = fs::read_to_string(path).ok()?;
    let other = init_in_other_zone(&text, &ctx.layout.cgroup_group(), name)?;
    Some(format!(
        "its init, pid {}, belongs to zone '{other}' (its cgroup); ignored",
        init.pid
    ))
}

/// The other zone of this root's cgroup `group` that a `/proc/<pid>/cgroup` text puts
/// the process in, if it is in no cgroup of zone `name` and in one of another zone.
fn init_in_other_zone(proc_cgroup: &str, group: &str, name: &str) -> Option<String> {
    // Every component that follows one named `group` (warren's own cgroup may carry
    // the same name higher up the path), for every hierarchy.
    let zones: Vec<&str> = proc_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .flat_map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            // On v2 a zone sits in a bucket of its group (`@memory-pids/<zone>`).
            (0..parts.len())
                .filter(|&i| parts[i] == group)
                .filter_map(|i| {
                    let mut j = i + 1;
                    if parts
                        .get(j)
                        .is_some_and(|b| crate::cgroups::v2::is_bucket(b))
                    {
                        j += 1;
                    }
                    parts.get(j).copied().filter(|z| !z.is_empty())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if zones.contains(&name) {
        return None;
    }
    zones.last().map(|z| z.to_string())
}

/// The cgroups named after zone `name` in this root's group, in every hierarchy:
/// what its runtime record would list (used when the record is torn or unreadable).
pub(crate) fn cgroups_by_name(ctx: &Context, name: &str) -> Result<crate::cgroups::CgroupSet> {
    let (driver, _) = ctx.cgroups()?;
    let dirs = driver
        .parents()
        .into_iter()
        .map(|(c, parent)| (c, parent.join(name)))
        .filter(|(_, d)| d.is_dir())
        .collect();
    Ok(crate::cgroups::CgroupSet {
        version: driver.version(),
        dirs,
    })
}

/// Kill and remove the cgroups named after zone `name` (its record being unusable).
/// Its address lease, if any, is freed by `warren gc` (a lease whose zone is not
/// running is stale).
pub(crate) fn clean_by_name(ctx: &Context, name: &str) -> Result<()> {
    let set = cgroups_by_name(ctx, name)?;
    if !set.dirs.is_empty() {
        set.kill_all(std::time::Duration::from_secs(10))?;
        set.remove(std::time::Duration::from_secs(5))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_of_another_zone_is_not_in_this_zones_cgroups() {
        let mine = "12:pids:/user.slice/warren-1/web1\n4:memory:/user.slice/warren-1/web1/svc\n1:name=systemd:/user.slice\n";
        let other = "12:pids:/user.slice/warren-1/web2\n4:memory:/user.slice/warren-1/web2\n1:name=systemd:/user.slice\n";
        assert_eq!(init_in_other_zone(mine, "warren-1", "web1"), None);
        assert_eq!(
            init_in_other_zone(other, "warren-1", "web1").as_deref(),
            Some("web2")
        );
        let v2 = "0::/system.slice/warren/web10\n";
        assert_eq!(
            init_in_other_zone(v2, "warren", "web1").as_deref(),
            Some("web10")
        );
        assert_eq!(
            init_in_other_zone("0::/system.slice/warren/web1\n", "warren", "web1"),
            None
        );
        // warren's own cgroup named like the group.
        assert_eq!(
            init_in_other_zone("0::/warren/warren/web1/x\n", "warren", "web1"),
            None
        );
        assert_eq!(
            init_in_other_zone("0::/warren/warren/web2\n", "warren", "web1").as_deref(),
            Some("web2")
        );
        // v2 buckets: the zone is the component after the bucket.
        let bucketed = "0::/warren.service/warren/@cpu-memory-pids/web1\n";
        assert_eq!(init_in_other_zone(bucketed, "warren", "web1"), None);
        assert_eq!(
            init_in_other_zone(bucketed, "warren", "web2").as_deref(),
            Some("web1")
        );
        // Not in any zone of this root: not called foreign.
        assert_eq!(init_in_other_zone("0::/\n", "warren", "web1"), None);
        assert_eq!(init_in_other_zone("", "warren", "web1"), None);
    }
}
