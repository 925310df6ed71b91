//! `start`: open `exec.fifo` so the waiting init execs the process.

use super::*;

pub fn start(ctx: &Ctx, id: &str) -> Result<()> {
    let mut r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, Verb::Start).map_err(refused)?;
    let spec = load_spec(id, &r.bundle)?;
    let h = hooks_of(&spec);
    let pid = r.pid.expect("created containers have a pid");
    let st = state_json(&r, Status::Created).to_string();
    if let Some(hs) = h.start_container() {
        hooks::run_in_container(id, "startContainer", hs, &st, pid, &ctx.proc_root)?;
    }
    let fifo = state::dir(&ctx.root, id).join("exec.fifo");
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .ctx(|| format!("container '{id}': opening {}", fifo.display()))?;
    // Wait for the init's byte (it opened the fifo), then for EOF (it exec'd): in
    // poll(2), which wakes on the byte and on the writer's close, so start returns
    // as soon as the init has exec'd (a fixed sleep per round added up to a
    // millisecond or more under load).
    let mut got_byte = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) if got_byte => break,
            // No writer yet (the init's open of the fifo returns once ours has).
            Ok(0) => {}
            Ok(_) => {
                got_byte = true;
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                return Err(e).ctx(|| format!("container '{id}': reading {}", fifo.display()))
            }
        }
        if state::observe_host(&r, &ctx.proc_root) == Status::Stopped && !got_byte {
            return Err(refused(format!(
                "container '{id}': its init exited before start; see the runtime log"
            )));
        }
        if Instant::now() > deadline {
            return Err(refused(format!(
                "container '{id}': its init did not exec within 30 s of start"
            )));
        }
        // Bounded: the init's death is checked between rounds. POLLHUP before the
        // byte (a writer that closed without writing) stays set: sleep then.
        let revents =
            warren_sys::pty::poll(&[(f.as_raw_fd(), libc::POLLIN)], 10).unwrap_or_default();
        if !got_byte && revents.first().is_some_and(|r| r & libc::POLLHUP != 0) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    r.awaiting_start = false;
    state::save(&ctx.root, &r)?;
    let _ = std::fs::remove_file(&fifo);
    if let Some(hs) = h.poststart() {
        let st = state_json(&r, Status::Running).to_string();
        if let Err(e) = hooks::run_host(id, "poststart", hs, &st) {
            ctx.log.warn(&e.to_string());
        }
    }
    Ok(())
}
