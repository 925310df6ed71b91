//! `update --resources`: new limits on a live container.

use super::*;

pub fn update(ctx: &Ctx, id: &str, resources: &str) -> Result<()> {
    let text = if resources == "-" {
        let mut s = String::new();
        std::io::stdin()
            .take(crate::fsutil::MAX_SMALL_FILE + 1)
            .read_to_string(&mut s)
            .ctx(|| "reading resources from stdin".to_string())?;
        if s.len() as u64 > crate::fsutil::MAX_SMALL_FILE {
            return Err(Error::Invalid(format!(
                "container '{id}': --resources from stdin is larger than 1 MiB; pass linux.resources JSON"
            )));
        }
        s
    } else {
        crate::fsutil::read_text_bounded(Path::new(resources), crate::fsutil::MAX_SMALL_FILE)
            .ctx(|| format!("container '{id}': reading --resources {resources}"))?
    };
    let res: oci_spec::runtime::LinuxResources = serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': --resources {resources}: {e}; expected linux.resources JSON"
        ))
    })?;
    update_resources(ctx, id, &res)
}

/// New limits from a parsed `linux.resources` (the CLI above, the containerd shim's
/// UpdateTask).
pub fn update_resources(
    ctx: &Ctx,
    id: &str,
    res: &oci_spec::runtime::LinuxResources,
) -> Result<()> {
    let r = state::load(&ctx.root, id)?;
    let (limits, _) = cgroup::limits(res, cgroup::host_has_memsw())
        .map_err(|e| Error::Invalid(format!("container '{id}': {e}")))?;
    let set = r
        .cgroups
        .as_ref()
        .ok_or_else(|| refused(format!("container '{id}': it has no cgroups yet")))?;
    cgroup::apply(id, set, &limits)
}
