//! `warren bench cri`'s report: report.md (one table row per handler and N) and
//! results.json (the [`super::run::CriResults`] object).

use std::path::Path;

use super::phases::Breakdown;
use super::run::{CriResults, CriStep};
use crate::error::Result;

/// The Markdown report.
pub fn markdown(r: &CriResults) -> String {
    let m = &r.machine;
    let mut s = format!(
        "# warren bench cri ({})\n\n{} ({} CPUs, {:.0} MiB, cgroup {}), {}, load at start {}; \
         the host is shared with other work: the numbers are noisy.\n\n\
         Pods through a private containerd's CRI, one `busybox sleep` container each; \
         handler `warren` is the runc v2 shim with BinaryName = warren-oci, \
         `warren-shim` warren's own shim (containerd-shim-warren-v1, one per pod), \
         `warren-shim-node` the same shim, one for every pod (WARREN_SHIM_GROUP=node). Latencies \
         in ms (median / p99); memory per pod in KiB.\n\n",
        r.date,
        m.kernel,
        m.cpus,
        m.mem_total_mib,
        m.cgroup_version,
        r.containerd_version,
        m.loadavg_at_start
    );
    s.push_str(
        "| handler | pods | net | RunPodSandbox | CreateContainer | StartContainer | teardown per pod | teardown all | shims | shim threads/pod | shim RSS/pod | shim PSS/pod | containerd growth/pod | host pinned/pod | host anon/pod | load |\n",
    );
    s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for st in &r.steps {
        let l = |x: &crate::measure::Summary| format!("{:.1} / {:.1}", x.median, x.p99);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |\n",
            st.handler,
            st.pods,
            if st.pod_network { "pod" } else { "host" },
            l(&st.run_pod_sandbox_ms),
            l(&st.create_container_ms),
            l(&st.start_container_ms),
            l(&st.teardown_ms),
            st.teardown_total_ms,
            st.shims,
            st.shim_threads_per_pod,
            st.shim_rss_kib_per_pod,
            st.shim_pss_kib_per_pod,
            st.containerd_rss_growth_kib_per_pod,
            st.host_per_pod.pinned_kib,
            st.host_per_pod.anon_kib,
            st.loadavg
        ));
    }
    s.push_str(
        "\n## Memory beyond the containers\n\nPer pod, KiB. *Held* memory is what the \
         kernel cannot drop (anon, shmem, kernel: slab, stacks, page tables, per-CPU): the \
         host's rise from /proc/meminfo, the pods' memory cgroups (sandbox and containers) \
         from their stat files. *Beyond* = host − cgroups, split into the shims' anonymous \
         PSS, containerd's anonymous growth, the CRI client's (the bench's python3, in the \
         kubelet's place), the kernel's rise outside the pods' cgroups and the rest \
         (other processes of the host: noise). The kernel's part is split \
         in turn: the per-memcg shrinker state of the pods' memory cgroups (memcgs per \
         pod × what one empty memcg adds on this boot, set by the highest shrinker id \
         since boot, not by the pod), dying memory cgroups (earlier pods') the kernel \
         freed (−) or gained (+) meanwhile × the same, and the rest of the kernel's rise.\n\n",
    );
    s.push_str(&memcg_probe(r));
    s.push_str(
        "| handler | pods | host held | cgroups usage | cgroups held | of it kernel | beyond | shims anon | containerd anon | CRI client anon | kernel outside | memcgs/pod | of it: memcgs' shrinker state (this boot's mark) | of it: dying memcgs freed (−) / gained (+) | of it: the rest | rest | containerd PSS growth |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for st in &r.steps {
        let b = &st.beyond;
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
            st.handler,
            st.pods,
            b.host_kib,
            b.cgroups_usage_kib,
            b.cgroups_held_kib,
            b.cgroups_kernel_kib,
            b.beyond_kib,
            b.shim_anon_kib,
            b.containerd_anon_kib,
            b.client_anon_kib,
            b.kernel_kib,
            b.memcgs_per_pod,
            b.kernel_memcg_kib,
            b.kernel_dying_kib,
            b.kernel_rest_kib,
            b.rest_kib,
            b.containerd_pss_kib,
        ));
    }
    s.push_str(&format!(
        "\n`{}` per pod, KiB: objects rise / slots rise (the slab pages; fewer when new \
         objects fill slots earlier frees left): {}.\n",
        crate::bench::cri::memcg::CACHE,
        r.steps
            .iter()
            .map(|st| format!(
                "{} {}: {:.0} / {:.0}",
                st.handler, st.pods, st.beyond.cache_objects_kib, st.beyond.cache_slots_kib
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    for st in &r.steps {
        if let Some(b) = &st.breakdown {
            s.push_str(&breakdown(st, b));
        }
    }
    s
}

/// The probe's line: what one empty memory cgroup adds outside it on this boot.
fn memcg_probe(r: &CriResults) -> String {
    match (&r.memcg_probe, &r.memcg_probe_error) {
        (Some(p), _) => format!(
            "One empty memory cgroup adds {:.0} `{}` objects of {} B = **{:.0} KiB** of slab \
             outside it on this boot (median of {} rounds of {} memcgs: {}), the \
             shrinker_info of about {} shrinker ids.\n\n",
            p.objects_per_memcg,
            p.cache,
            p.object_bytes,
            p.kib_per_memcg,
            p.rounds,
            p.memcgs,
            p.objects_per_memcg_rounds
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            p.shrinker_ids,
        ),
        (None, Some(e)) => {
            format!("The per-memcg probe did not run ({e}): the kernel's part is not split.\n\n")
        }
        (None, None) => String::new(),
    }
}

/// A step's RunPodSandbox phases (containerd at log level debug, which slows it).
fn breakdown(st: &CriStep, b: &Breakdown) -> String {
    let l = |x: &crate::measure::Summary| format!("{:.1} / {:.1}", x.median, x.p99);
    let mut s = format!(
        "\n## RunPodSandbox broken down: {}, {} pods, {} snapshotter\n\n\
         From containerd's debug log ({} pods found whole); ms, median / p99. \
         containerd's own view, request in to answer: {}.\n\n\
         | phase | pods | ms |\n|---|---:|---:|\n",
        st.handler,
        st.pods,
        st.snapshotter,
        b.pods,
        b.total_ms.as_ref().map(l).unwrap_or_else(|| "-".into()),
    );
    for p in &b.phases {
        s.push_str(&format!("| {} | {} | {} |\n", p.name, p.pods, l(&p.ms)));
    }
    if let Some(h) = &b.helper_ms {
        s.push_str(&format!(
            "| of task create: the shim's helper (fork, exec, the pause container's create) | {} | {} |\n",
            b.pods,
            l(h)
        ));
    }
    s
}

/// Write `results.json` and `report.md` into `dir`.
pub fn write(dir: &Path, r: &CriResults) -> Result<()> {
    crate::bench::write_files(dir, r, [("report.md", markdown(r))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cri::phases::Phase;
    use crate::bench::cri::run::Beyond;
    use crate::bench::Machine;
    use crate::measure::{summarize, MemPerZone};

    #[test]
    fn one_row_per_handler_and_step() {
        let step = |handler: &str, pods: usize| CriStep {
            handler: handler.into(),
            pods,
            pod_network: false,
            snapshotter: "native".into(),
            run_pod_sandbox_ms: summarize(&[90.0, 110.0]),
            create_container_ms: summarize(&[40.0]),
            start_container_ms: summarize(&[50.0]),
            teardown_ms: summarize(&[100.0]),
            teardown_total_ms: 1000.0,
            shims: pods as u64,
            shim_threads_per_pod: 12.0,
            shim_rss_kib_per_pod: 13400.0,
            shim_pss_kib_per_pod: 3000.0,
            containerd_rss_growth_kib_per_pod: 400.0,
            host_per_pod: MemPerZone::default(),
            beyond: Beyond {
                beyond_kib: 812.0,
                shim_anon_kib: 600.0,
                kernel_kib: 2000.0,
                memcgs_per_pod: 3.0,
                kernel_memcg_kib: 1876.4,
                kernel_rest_kib: 123.6,
                ..Beyond::default()
            },
            breakdown: (handler == "warren").then(|| Breakdown {
                pods,
                total_ms: Some(summarize(&[50.0])),
                phases: vec![Phase {
                    name: "task start".into(),
                    pods,
                    ms: summarize(&[3.0]),
                }],
                helper_ms: None,
            }),
            loadavg: "1.00 1.00 1.00".into(),
        };
        let r = CriResults {
            schema_version: 1,
            date: "2026-12-04T00:00:00Z".into(),
            machine: Machine {
                hostname: "h".into(),
                kernel: "6.1".into(),
                cpus: 2,
                mem_total_mib: 1024.0,
                cgroup_version: "v1".into(),
                storage_backend: "overlay".into(),
                loadavg_at_start: "1.00".into(),
            },
            containerd_version: "containerd 1.6.20".into(),
            memcg_probe: Some(crate::bench::cri::memcg::MemcgProbe::from_rounds(
                10,
                1024,
                &[(0, 6250), (0, 6260)],
            )),
            memcg_probe_error: None,
            steps: vec![step("runc", 10), step("warren", 10)],
        };
        let md = markdown(&r);
        assert!(
            md.contains("| runc | 10 | host | 100.0 / 110.0 | 40.0 / 40.0 |"),
            "{md}"
        );
        assert!(md.contains("| warren | 10 | host |"), "{md}");
        assert!(md.contains("| 10 | 12.0 | 13400 | 3000 | 400 |"), "{md}");
        assert!(md.contains("## Memory beyond the containers"), "{md}");
        assert!(
            md.contains("## RunPodSandbox broken down: warren, 10 pods, native snapshotter"),
            "{md}"
        );
        assert!(md.contains("| task start | 10 | 3.0 / 3.0 |"), "{md}");
        assert!(!md.contains("broken down: runc"), "{md}");
        assert!(
            md.contains(
                "| warren | 10 | 0 | 0 | 0 | 0 | 812 | 600 | 0 | 0 | 2000 | 3.0 | 1876 | 0 | 124 | 0 | 0 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("adds 626 `kmalloc-1k` objects of 1024 B = **626 KiB** of slab"),
            "{md}"
        );
        assert!(md.contains("2 rounds of 10 memcgs: 625.0, 626.0"), "{md}");
    }
}
