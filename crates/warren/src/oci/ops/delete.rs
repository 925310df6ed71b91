//! `delete`: remove a stopped (or, with `--force`, any) container.

use super::*;

pub fn delete(ctx: &Ctx, id: &str, force: bool) -> Result<()> {
    let r = match state::load(&ctx.root, id) {
        Ok(r) => r,
        Err(e)
            if force
                && !state::dir(&ctx.root, id).join("state.json").exists()
                && state::check_id(id).is_ok() =>
        {
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, Verb::Delete { force }).map_err(refused)?;
    let ran = r.pid.is_some();
    destroy(ctx, &r)?;
    if ran {
        if let Ok(spec) = load_spec(id, &r.bundle) {
            if let Some(hs) = hooks_of(&spec).poststop() {
                let st = state_json(&r, Status::Stopped).to_string();
                if let Err(e) = hooks::run_host(id, "poststop", hs, &st) {
                    ctx.log.warn(&e.to_string());
                }
            }
        }
    }
    Ok(())
}
