//! `warren metrics`: one scrape, printed or written atomically.

use super::*;
use crate::metrics::{self, Format};

pub(super) fn metrics_cmd(ctx: &Context, oci_root: &Path, a: MetricsArgs) -> Result<()> {
    if a.doctor_zones == 0 {
        return Err(Error::Invalid(
            "--doctor-zones must be at least 1: give the density to judge the host against, e.g. --doctor-zones 1000".into(),
        ));
    }
    if a.doctor_row {
        output::json(&metrics::doctor_row(ctx, a.doctor_zones));
        return Ok(());
    }
    let agent = match &a.agent_config {
        None => crate::agent::AgentConfig::defaults(),
        Some(p) => crate::agent::config::load_file(p, "--agent-config")?,
    };
    let format = match a.format.as_str() {
        "prometheus" => Format::Prometheus,
        _ => Format::OpenMetrics,
    };
    let opts = metrics::Options {
        oci_root: Some(oci_root.to_path_buf()),
        agent,
        doctor_zones: a.doctor_zones,
        doctor: !a.no_doctor,
    };
    let text = metrics::render(ctx, opts, format)?;
    match &a.output {
        None => print!("{text}"),
        Some(p) => crate::fsutil::atomic_write(p, text.as_bytes(), false).ctx(|| {
            format!(
                "writing {} (its directory must exist and be writable)",
                p.display()
            )
        })?,
    }
    Ok(())
}
