//! `warren bench cri`'s report: report.md (one table row per handler and N) and
//! results.json (the [`super::run::CriResults`] object).

use std::path::Path;

use super::run::CriResults;
use crate::error::Result;

/// The Markdown report.
pub fn markdown(r: &CriResults) -> String {
    let m = &r.machine;
    let mut s = format!(
        "# warren bench cri ({})\n\n{} ({} CPUs, {:.0} MiB, cgroup {}), {}, load at start {}; \
         the host is shared with other work: the numbers are noisy.\n\n\
         Pods through a private containerd's CRI, one `busybox sleep` container each; \
         handler `warren` is the runc v2 shim with BinaryName = warren-oci. Latencies \
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
        "| handler | pods | net | RunPodSandbox | CreateContainer | StartContainer | teardown per pod | teardown all | shims | shim RSS/pod | shim PSS/pod | containerd growth/pod | host pinned/pod | host anon/pod | load |\n",
    );
    s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for st in &r.steps {
        let l = |x: &crate::measure::Summary| format!("{:.1} / {:.1}", x.median, x.p99);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |\n",
            st.handler,
            st.pods,
            if st.pod_network { "pod" } else { "host" },
            l(&st.run_pod_sandbox_ms),
            l(&st.create_container_ms),
            l(&st.start_container_ms),
            l(&st.teardown_ms),
            st.teardown_total_ms,
            st.shims,
            st.shim_rss_kib_per_pod,
            st.shim_pss_kib_per_pod,
            st.containerd_rss_growth_kib_per_pod,
            st.host_per_pod.pinned_kib,
            st.host_per_pod.anon_kib,
            st.loadavg
        ));
    }
    s
}

/// Write `results.json` and `report.md` into `dir`.
pub fn write(dir: &Path, r: &CriResults) -> Result<()> {
    crate::bench::write_files(dir, r, [("report.md", markdown(r))])
}
