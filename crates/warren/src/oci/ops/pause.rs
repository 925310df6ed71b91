//! `pause` / `resume`: freeze and thaw the container's cgroup.

use super::*;

pub fn pause(ctx: &Ctx, id: &str, on: bool) -> Result<()> {
    let r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, if on { Verb::Pause } else { Verb::Resume }).map_err(refused)?;
    let set = r.cgroups.as_ref().expect("a running container has cgroups");
    cgroup::freeze(id, set, on)
}
