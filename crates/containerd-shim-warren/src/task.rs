//! The task service (containerd's `containerd.task.v2.Task` over ttrpc): each call
//! maps onto `warren::oci::ops` (create and exec through [`crate::helper`]), the
//! cgroup freezer for pause/resume, the cgroup figures for stats.
//!
//! The server runs the calls on one thread ([`crate::bootstrap::serve`]'s runtime).
//! A call runs to its end on that thread except where it waits for an exit: `Wait`,
//! and a `create` or an exec's `start` for its helper ([`Service::spawn`]). Those
//! wait as tasks, so a pod's waits hold no thread and a slow helper holds up no
//! other call. A `delete`'s kill and cgroup removal, bounded but possibly seconds
//! long, run on a thread of tokio's blocking pool.

use std::path::PathBuf;

use containerd_shim::api::{self, Empty};
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{EnumOrUnknown, Message, MessageField};
use containerd_shim::protos::shim_async::Task;
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::r#async::TtrpcContext;
use containerd_shim::protos::ttrpc::{Code, Error as RpcError};
use containerd_shim::TtrpcResult;
use warren::oci::{ops, Ctx};

use crate::helper::Verb;
use crate::service::{self, now, rpc_err, warren_err, Container, Proc, Service, Table};
use crate::stdio::Paths;

fn not_found(id: &str, exec_id: &str) -> RpcError {
    let what = if exec_id.is_empty() {
        String::new()
    } else {
        format!(" exec '{exec_id}'")
    };
    rpc_err(
        Code::NOT_FOUND,
        format!("container '{id}'{what}: not found in this shim"),
    )
}

fn get<'a>(t: &'a Table, id: &str) -> TtrpcResult<&'a Container> {
    t.containers.get(id).ok_or_else(|| not_found(id, ""))
}

fn proc_of<'a>(t: &'a Table, id: &str, exec_id: &str) -> TtrpcResult<&'a Proc> {
    get(t, id)?
        .proc(exec_id)
        .ok_or_else(|| not_found(id, exec_id))
}

/// containerd's runc options (`SystemdCgroup`), if the runtime was given them.
fn systemd_cgroup(options: &MessageField<Any>) -> bool {
    options
        .as_ref()
        .filter(|a| a.type_url.ends_with("runc.v1.Options"))
        .and_then(|a| api::Options::parse_from_bytes(&a.value).ok())
        .is_some_and(|o| o.systemd_cgroup)
}

/// An exec id becomes a file name in the bundle: only the characters of
/// containerd's own ids.
fn check_exec_id(id: &str, exec_id: &str) -> TtrpcResult<()> {
    let ok = !exec_id.is_empty()
        && exec_id.len() <= 128
        && exec_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        return Ok(());
    }
    Err(rpc_err(
        Code::INVALID_ARGUMENT,
        format!("container '{id}': exec id {exec_id:?}: use 1 to 128 of A-Z a-z 0-9 _ . -"),
    ))
}

impl Service {
    fn ctx(&self) -> Ctx {
        service::ctx(&self.shared.namespace, false)
    }

    fn exit_of(
        p: &Proc,
    ) -> (
        u32,
        MessageField<containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp>,
    ) {
        match &p.exit {
            Some((code, at)) => (*code, MessageField::some(at.clone())),
            None => (0, MessageField::none()),
        }
    }
}

/// Run `call` as a task of its own, to its end whatever becomes of the caller.
async fn to_end<T: Send + 'static>(
    call: impl std::future::Future<Output = TtrpcResult<T>> + Send + 'static,
) -> TtrpcResult<T> {
    tokio::spawn(call)
        .await
        .unwrap_or_else(|e| Err(rpc_err(Code::INTERNAL, format!("the call failed: {e}"))))
}

/// The calls that change the table across awaits (see [`to_end`]).
impl Service {
    async fn create_to_end(
        &self,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        let _creating = service::Creating::new(&self.shared);
        let id = req.id.clone();
        let began = std::time::Instant::now();
        log::debug!("create {id}: request");
        let bundle = PathBuf::from(&req.bundle);
        if self.shared.lock().containers.contains_key(&id) {
            return Err(rpc_err(
                Code::ALREADY_EXISTS,
                format!("container '{id}': already exists in this shim"),
            ));
        }
        let rootfs = bundle.join("rootfs");
        for m in &req.rootfs {
            containerd_shim::mount::mount_rootfs(
                Some(&m.type_),
                Some(&m.source),
                &m.options,
                &rootfs,
            )
            .map_err(|e| {
                service::unmount_rootfs(&bundle);
                rpc_err(
                    Code::UNKNOWN,
                    format!(
                        "container '{id}': mounting its rootfs ({} {}): {e}",
                        m.type_, m.source
                    ),
                )
            })?;
        }
        let paths = Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        let ctx = service::ctx(&self.shared.namespace, systemd_cgroup(&req.options));
        let verb = Verb::Create {
            bundle: bundle.clone(),
        };
        let helper = std::time::Instant::now();
        let (pid, kept, since) = self
            .spawn(&ctx, &id, verb, &paths, "init", &bundle)
            .await
            .inspect_err(|_| service::unmount_rootfs(&bundle))?;
        let helper_ms = helper.elapsed().as_secs_f64() * 1e3;
        let mut init = Proc::new(paths.clone());
        init.pid = pid;
        init.kept = kept;
        let cgroups = warren::oci::state::load(&ctx.root, &id)
            .ok()
            .and_then(|r| r.cgroups);
        if let (Some(w), Some(set)) = (&self.shared.oom, &cgroups) {
            if let Err(e) = w.add(&id, set) {
                log::warn!("container '{id}': watching its memory cgroup for OOM kills: {e}; they are reported at its exit");
            }
        }
        let mut t = self.shared.lock();
        t.containers.insert(
            id.clone(),
            Container {
                bundle,
                init,
                execs: Default::default(),
                mounted: !req.rootfs.is_empty(),
                cgroups,
                ooms_published: 0,
            },
        );
        self.shared.publish(
            topics::TASK_CREATE_EVENT_TOPIC,
            ev::TaskCreate {
                container_id: id.clone(),
                bundle: req.bundle.clone(),
                rootfs: req.rootfs.clone(),
                io: MessageField::some(ev::TaskIO {
                    stdin: paths.stdin,
                    stdout: paths.stdout,
                    stderr: paths.stderr,
                    terminal: paths.terminal,
                    ..Default::default()
                }),
                pid: pid as u32,
                ..Default::default()
            },
        );
        // The log goes to a live task's FIFO (crate::logfifo): after the task it
        // went to was deleted (a node's shim outlives pods), to this one's.
        let log_live =
            crate::logfifo::current().is_some_and(|b| t.containers.values().any(|c| c.bundle == b));
        if !log_live {
            if let Err(e) = crate::logfifo::switch_to(&t.containers[&id].bundle) {
                eprintln!("container '{id}': moving the shim's log to its bundle: {e}");
            }
        }
        // It died before its pid was in the table (killed, or out of memory at
        // once): its exit was kept for it, and goes out after TaskCreate.
        if let Some(code) = t.claim(pid, since) {
            let at = now();
            if let Some(c) = t.containers.get_mut(&id) {
                c.init.exit = Some((code as u32, at.clone()));
            }
            self.shared.check_oom(&mut t, &id, None);
            self.shared.publish_exit(&id, &id, pid, code, at);
            drop(t);
            self.shared.wake();
        } else {
            drop(t);
        }
        log::debug!(
            "create {id}: done in {:.2} ms (rootfs mounts {:.2} ms, helper {helper_ms:.2} ms)",
            began.elapsed().as_secs_f64() * 1e3,
            (helper - began).as_secs_f64() * 1e3,
        );
        Ok(api::CreateTaskResponse {
            pid: pid as u32,
            ..Default::default()
        })
    }

    async fn start_to_end(&self, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        let id = &req.id;
        if req.exec_id.is_empty() {
            let began = std::time::Instant::now();
            // Under the table's lock: TaskStart goes out before the init's TaskExit.
            let t = self.shared.lock();
            let pid = get(&t, id)?.init.pid;
            ops::start(&self.ctx(), id).map_err(warren_err)?;
            log::debug!(
                "start {id}: done in {:.2} ms",
                began.elapsed().as_secs_f64() * 1e3
            );
            self.shared.publish(
                topics::TASK_START_EVENT_TOPIC,
                ev::TaskStart {
                    container_id: id.clone(),
                    pid: pid as u32,
                    ..Default::default()
                },
            );
            return Ok(api::StartResponse {
                pid: pid as u32,
                ..Default::default()
            });
        }
        let exec_id = &req.exec_id;
        let (paths, bundle) = {
            let t = self.shared.lock();
            let c = get(&t, id)?;
            let p = c.proc(exec_id).ok_or_else(|| not_found(id, exec_id))?;
            if p.pid != 0 {
                return Err(rpc_err(
                    Code::FAILED_PRECONDITION,
                    format!("container '{id}': exec '{exec_id}' was started already"),
                ));
            }
            (p.paths.clone(), c.bundle.clone())
        };
        let process = bundle.join(format!("{exec_id}.process.json"));
        let ctx = self.ctx();
        let (pid, kept, since) = self
            .spawn(&ctx, id, Verb::Exec { process }, &paths, exec_id, &bundle)
            .await?;
        let mut t = self.shared.lock();
        let early = t.claim(pid, since);
        let p = t
            .containers
            .get_mut(id)
            .and_then(|c| c.execs.get_mut(exec_id))
            .ok_or_else(|| not_found(id, exec_id))?;
        p.pid = pid;
        p.kept = kept;
        self.shared.publish(
            topics::TASK_EXEC_STARTED_EVENT_TOPIC,
            ev::TaskExecStarted {
                container_id: id.clone(),
                exec_id: exec_id.clone(),
                pid: pid as u32,
                ..Default::default()
            },
        );
        // It exited before its pid was in the table: its exit was kept for it.
        if let Some(code) = early {
            let at = now();
            p.exit = Some((code as u32, at.clone()));
            self.shared.publish_exit(id, exec_id, pid, code, at);
            drop(t);
            self.shared.wake();
        }
        Ok(api::StartResponse {
            pid: pid as u32,
            ..Default::default()
        })
    }

    async fn delete_to_end(&self, req: api::DeleteRequest) -> TtrpcResult<api::DeleteResponse> {
        let (id, exec_id) = (&req.id, &req.exec_id);
        if !exec_id.is_empty() {
            let mut t = self.shared.lock();
            let c = t.containers.get_mut(id).ok_or_else(|| not_found(id, ""))?;
            let p = c.execs.get(exec_id).ok_or_else(|| not_found(id, exec_id))?;
            if p.pid != 0 && p.exit.is_none() {
                return Err(rpc_err(
                    Code::FAILED_PRECONDITION,
                    format!("container '{id}': exec '{exec_id}' is still running; kill it first"),
                ));
            }
            let p = c.execs.remove(exec_id).expect("looked up above");
            let _ = std::fs::remove_file(c.bundle.join(format!("{exec_id}.process.json")));
            let (exit_status, exited_at) = Self::exit_of(&p);
            return Ok(api::DeleteResponse {
                pid: p.pid as u32,
                exit_status,
                exited_at,
                ..Default::default()
            });
        }
        get(&self.shared.lock(), id)?;
        // The watch goes before the cgroup (whose removal v1 notifies).
        if let Some(w) = &self.shared.oom {
            w.remove(id);
        }
        // A created (never started) init is killed by the forced delete. Killing
        // what is left and removing the cgroups is bounded (10 s for the processes
        // to die, 5 s for the cgroups to go) but may take that long: off the
        // runtime's thread, which serves the other containers meanwhile (their
        // exits too: a killed init's is recorded and published as usual).
        let (ctx, cid) = (self.ctx(), id.clone());
        tokio::task::spawn_blocking(move || ops::delete(&ctx, &cid, true))
            .await
            .map_err(|e| rpc_err(Code::INTERNAL, format!("container '{id}': delete: {e}")))?
            .map_err(warren_err)?;
        // The killed init's exit reaches the table through the reaper and this
        // thread's queue, maybe not yet: wait for it (bounded), so its TaskExit goes
        // out before TaskDelete, as containerd expects, and the exit is its own, not
        // an unclaimed one.
        let deadline = tokio::time::Instant::now() + EXIT_AFTER_DELETE;
        self.shared
            .until_exit(Some(deadline), |t| {
                t.containers
                    .get(id)
                    .is_none_or(|c| c.init.pid == 0 || c.init.exit.is_some())
                    .then_some(())
            })
            .await;
        // Gone meanwhile: another Delete of it got there first.
        let c = self
            .shared
            .lock()
            .containers
            .remove(id)
            .ok_or_else(|| not_found(id, ""))?;
        if c.mounted {
            service::unmount_rootfs(&c.bundle);
        }
        // containerd stops reading this task's log FIFO: move the log to a live
        // task's (a node's shim serves other pods' tasks still).
        if crate::logfifo::current().as_deref() == Some(c.bundle.as_path()) {
            let other = self
                .shared
                .lock()
                .containers
                .values()
                .next()
                .map(|o| o.bundle.clone());
            if let Some(b) = other {
                match crate::logfifo::switch_to(&b) {
                    Ok(()) => log::debug!("the shim's log goes to {} now", b.display()),
                    Err(e) => eprintln!("moving the shim's log to {}: {e}", b.display()),
                }
            }
        }
        let pid = c.init.pid;
        let (exit_status, at) = c.init.exit.clone().unwrap_or_else(|| (128 + 9, now()));
        self.shared.publish(
            topics::TASK_DELETE_EVENT_TOPIC,
            ev::TaskDelete {
                container_id: id.clone(),
                pid: pid as u32,
                exit_status,
                exited_at: MessageField::some(at.clone()),
                ..Default::default()
            },
        );
        Ok(api::DeleteResponse {
            pid: pid as u32,
            exit_status,
            exited_at: MessageField::some(at),
            ..Default::default()
        })
    }
}

/// How long a `delete` waits for the reaper to record the exit of the init it killed.
const EXIT_AFTER_DELETE: std::time::Duration = std::time::Duration::from_secs(2);

#[async_trait::async_trait]
impl Task for Service {
    // Run to their end even if containerd drops the call (a disconnect, a
    // deadline): ttrpc drops a call's future then, and these three change the
    // table, mounts and the container's state across awaits.
    async fn create(
        &self,
        _ctx: &TtrpcContext,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        let me = self.clone();
        to_end(async move { me.create_to_end(req).await }).await
    }

    async fn start(
        &self,
        _ctx: &TtrpcContext,
        req: api::StartRequest,
    ) -> TtrpcResult<api::StartResponse> {
        let me = self.clone();
        to_end(async move { me.start_to_end(req).await }).await
    }

    async fn delete(
        &self,
        _ctx: &TtrpcContext,
        req: api::DeleteRequest,
    ) -> TtrpcResult<api::DeleteResponse> {
        let me = self.clone();
        to_end(async move { me.delete_to_end(req).await }).await
    }

    async fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<Empty> {
        let (id, exec_id) = (&req.id, &req.exec_id);
        check_exec_id(id, exec_id)?;
        let mut t = self.shared.lock();
        let c = t.containers.get_mut(id).ok_or_else(|| not_found(id, ""))?;
        if c.execs.contains_key(exec_id) {
            return Err(rpc_err(
                Code::ALREADY_EXISTS,
                format!("container '{id}': exec '{exec_id}' already exists"),
            ));
        }
        let spec = req
            .spec
            .as_ref()
            .map(|a| a.value.clone())
            .unwrap_or_default();
        let file = c.bundle.join(format!("{exec_id}.process.json"));
        std::fs::write(&file, spec).map_err(|e| {
            rpc_err(
                Code::UNKNOWN,
                format!("container '{id}': writing {}: {e}", file.display()),
            )
        })?;
        let paths = Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        c.execs.insert(exec_id.clone(), Proc::new(paths));
        self.shared.publish(
            topics::TASK_EXEC_ADDED_EVENT_TOPIC,
            ev::TaskExecAdded {
                container_id: id.clone(),
                exec_id: exec_id.clone(),
                ..Default::default()
            },
        );
        Ok(Empty::new())
    }

    async fn state(
        &self,
        _ctx: &TtrpcContext,
        req: api::StateRequest,
    ) -> TtrpcResult<api::StateResponse> {
        use containerd_shim::api::Status;
        let t = self.shared.lock();
        let c = get(&t, &req.id)?;
        let p = proc_of(&t, &req.id, &req.exec_id)?;
        let status = match (&p.exit, p.pid) {
            (Some(_), _) => Status::STOPPED,
            (None, 0) => Status::CREATED,
            (None, _) if !req.exec_id.is_empty() => Status::RUNNING,
            (None, _) => match ops::state(&self.ctx(), &req.id)
                .ok()
                .and_then(|v| v["status"].as_str().map(str::to_string))
                .as_deref()
            {
                Some("created") => Status::CREATED,
                Some("paused") => Status::PAUSED,
                Some("stopped") => Status::STOPPED,
                _ => Status::RUNNING,
            },
        };
        let (exit_status, exited_at) = Self::exit_of(p);
        Ok(api::StateResponse {
            id: req.id.clone(),
            bundle: c.bundle.display().to_string(),
            pid: p.pid as u32,
            status: EnumOrUnknown::new(status),
            stdin: p.paths.stdin.clone(),
            stdout: p.paths.stdout.clone(),
            stderr: p.paths.stderr.clone(),
            terminal: p.paths.terminal,
            exit_status,
            exited_at,
            exec_id: req.exec_id.clone(),
            ..Default::default()
        })
    }

    async fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<Empty> {
        let t = self.shared.lock();
        let p = proc_of(&t, &req.id, &req.exec_id)?;
        if p.exit.is_some() && !req.all {
            return Err(rpc_err(
                Code::NOT_FOUND,
                format!("container '{}': process already finished", req.id),
            ));
        }
        if req.exec_id.is_empty() {
            ops::kill(&self.ctx(), &req.id, &req.signal.to_string(), req.all)
                .map_err(warren_err)?;
        } else if p.pid <= 0 {
            // kill(0, …) would signal the shim's own process group.
            return Err(rpc_err(
                Code::FAILED_PRECONDITION,
                format!(
                    "container '{}': exec '{}' was not started",
                    req.id, req.exec_id
                ),
            ));
        } else {
            warren_sys::proc::kill(p.pid, req.signal as i32).map_err(|e| {
                rpc_err(
                    Code::UNKNOWN,
                    format!(
                        "container '{}': signal to exec '{}': {e}",
                        req.id, req.exec_id
                    ),
                )
            })?;
        }
        Ok(Empty::new())
    }

    async fn pids(
        &self,
        _ctx: &TtrpcContext,
        req: api::PidsRequest,
    ) -> TtrpcResult<api::PidsResponse> {
        get(&self.shared.lock(), &req.id)?;
        let pids = ops::pids(&self.ctx(), &req.id).map_err(warren_err)?;
        Ok(api::PidsResponse {
            processes: pids
                .into_iter()
                .map(|pid| containerd_shim::protos::api::ProcessInfo {
                    pid: pid as u32,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    async fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<Empty> {
        get(&self.shared.lock(), &req.id)?;
        ops::pause(&self.ctx(), &req.id, true).map_err(warren_err)?;
        self.shared.publish(
            topics::TASK_PAUSED_EVENT_TOPIC,
            ev::TaskPaused {
                container_id: req.id.clone(),
                ..Default::default()
            },
        );
        Ok(Empty::new())
    }

    async fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<Empty> {
        get(&self.shared.lock(), &req.id)?;
        ops::pause(&self.ctx(), &req.id, false).map_err(warren_err)?;
        self.shared.publish(
            topics::TASK_RESUMED_EVENT_TOPIC,
            ev::TaskResumed {
                container_id: req.id.clone(),
                ..Default::default()
            },
        );
        Ok(Empty::new())
    }

    async fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<Empty> {
        get(&self.shared.lock(), &req.id)?;
        let bytes = req
            .resources
            .as_ref()
            .map(|a| a.value.clone())
            .unwrap_or_default();
        let res: oci_spec::runtime::LinuxResources = serde_json::from_slice(&bytes).map_err(|e| {
            rpc_err(
                Code::INVALID_ARGUMENT,
                format!("container '{}': resources: {e}; expected the runtime spec's linux.resources as JSON", req.id),
            )
        })?;
        ops::update_resources(&self.ctx(), &req.id, &res).map_err(warren_err)?;
        Ok(Empty::new())
    }

    async fn stats(
        &self,
        _ctx: &TtrpcContext,
        req: api::StatsRequest,
    ) -> TtrpcResult<api::StatsResponse> {
        get(&self.shared.lock(), &req.id)?;
        let record = warren::oci::state::load(&self.ctx().root, &req.id).map_err(warren_err)?;
        let set = record.cgroups.ok_or_else(|| {
            rpc_err(
                Code::FAILED_PRECONDITION,
                format!("container '{}': it has no cgroups yet", req.id),
            )
        })?;
        let stats = crate::metrics::of(&set)
            .map_err(|e| rpc_err(Code::UNKNOWN, format!("container '{}': stats: {e}", req.id)))?;
        Ok(api::StatsResponse {
            stats: MessageField::some(stats),
            ..Default::default()
        })
    }

    async fn wait(
        &self,
        _ctx: &TtrpcContext,
        req: api::WaitRequest,
    ) -> TtrpcResult<api::WaitResponse> {
        let answer = self
            .shared
            .until_exit(None, |t| match proc_of(t, &req.id, &req.exec_id) {
                Err(e) => Some(Err(e)),
                Ok(p) if p.exit.is_some() => {
                    let (exit_status, exited_at) = Self::exit_of(p);
                    Some(Ok(api::WaitResponse {
                        exit_status,
                        exited_at,
                        ..Default::default()
                    }))
                }
                Ok(_) => None,
            })
            .await;
        let Some(answer) = answer else {
            unreachable!("until_exit answers None only at a deadline");
        };
        answer
    }

    async fn resize_pty(
        &self,
        _ctx: &TtrpcContext,
        req: api::ResizePtyRequest,
    ) -> TtrpcResult<Empty> {
        let t = self.shared.lock();
        let p = proc_of(&t, &req.id, &req.exec_id)?;
        if let Some(console) = &p.kept.console {
            use std::os::fd::AsRawFd;
            warren_sys::pty::set_winsize(console.as_raw_fd(), req.height as u16, req.width as u16)
                .map_err(|e| {
                    rpc_err(
                        Code::UNKNOWN,
                        format!("container '{}': resizing its terminal: {e}", req.id),
                    )
                })?;
        }
        Ok(Empty::new())
    }

    async fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<Empty> {
        let t = self.shared.lock();
        let p = proc_of(&t, &req.id, &req.exec_id)?;
        if req.stdin {
            if let Some(sink) = &p.kept.stdin {
                sink.lock().unwrap_or_else(|e| e.into_inner()).take();
            }
        }
        Ok(Empty::new())
    }

    async fn connect(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConnectRequest,
    ) -> TtrpcResult<api::ConnectResponse> {
        let mut t = self.shared.lock();
        t.last_call = Some(std::time::Instant::now());
        let task_pid = t.containers.get(&req.id).map(|c| c.init.pid).unwrap_or(0);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid: task_pid as u32,
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        })
    }

    async fn shutdown(
        &self,
        _ctx: &TtrpcContext,
        _req: api::ShutdownRequest,
    ) -> TtrpcResult<Empty> {
        if self.shared.lock().containers.is_empty() {
            match self.shared.linger {
                None => self.shared.stop.notify_one(),
                // A node's shim: stop only if still idle after the linger (no
                // container, no create under way, none or a connect since).
                Some(linger) => {
                    let shared = self.shared.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(linger).await;
                        if shared.lock().idle_for(linger) {
                            shared.stop.notify_one();
                        }
                    });
                }
            }
        }
        Ok(Empty::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod's container with a running init `pid` (no helper run, no warren state).
    fn with_running(svc: &Service, id: &str, pid: i32) {
        let mut init = Proc::new(Paths::default());
        init.pid = pid;
        svc.shared.lock().containers.insert(
            id.into(),
            Container {
                bundle: PathBuf::from("/nonexistent"),
                init,
                execs: Default::default(),
                mounted: false,
                cgroups: None,
                ooms_published: 0,
            },
        );
    }

    #[test]
    fn a_wait_holds_up_no_other_call_and_returns_at_the_exit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (svc, _events) = Service::new("test", None, None);
        // Pids no process has: only the exits recorded here end them.
        with_running(&svc, "a", i32::MAX - 1);
        with_running(&svc, "b", i32::MAX - 2);
        let ctx = TtrpcContext::default();
        rt.block_on(async {
            let waits: Vec<_> = ["a", "b"]
                .map(|id| {
                    let svc = svc.clone();
                    tokio::spawn(async move {
                        let req = api::WaitRequest {
                            id: id.into(),
                            ..Default::default()
                        };
                        svc.wait(&TtrpcContext::default(), req).await
                    })
                })
                .into();
            tokio::task::yield_now().await;
            assert!(waits.iter().all(|w| !w.is_finished()));
            // On the one thread both waits are on, another call is answered.
            let r = svc
                .connect(
                    &ctx,
                    api::ConnectRequest {
                        id: "a".into(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            assert_eq!(r.task_pid, (i32::MAX - 1) as u32);
            // The exit of b, recorded on another thread (as the reaper's subscriber
            // does), ends b's wait only.
            let shared = svc.shared.clone();
            std::thread::spawn(move || shared.exited(i32::MAX - 2, 7))
                .join()
                .unwrap();
            let [a, b]: [_; 2] = waits.try_into().unwrap();
            let b = b.await.unwrap().unwrap();
            assert_eq!(b.exit_status, 7);
            assert!(b.exited_at.is_some());
            tokio::task::yield_now().await;
            assert!(!a.is_finished(), "a's init still runs");
            let shared = svc.shared.clone();
            std::thread::spawn(move || shared.exited(i32::MAX - 1, 0))
                .join()
                .unwrap();
            assert_eq!(a.await.unwrap().unwrap().exit_status, 0);
            // A wait for a process that exited before it returns at once.
            let again = api::WaitRequest {
                id: "b".into(),
                ..Default::default()
            };
            assert_eq!(svc.wait(&ctx, again).await.unwrap().exit_status, 7);
        });
    }

    /// An exit kept for a pid not in the table goes to a process started before it
    /// was recorded (an init or exec that died before its `create` or `start` put its
    /// pid in the table); an earlier process's exit under a reused pid does not.
    #[test]
    fn an_unclaimed_exit_is_claimed_only_by_a_process_started_before_it() {
        let (svc, _events) = Service::new("test", None, None);
        let pid = i32::MAX - 5;
        // An earlier process with this pid exits, nobody's.
        svc.shared.exited(pid, 9);
        // A new process gets the pid: spawned after that exit was recorded.
        let since = svc.shared.lock().exits_seen;
        assert_eq!(
            svc.shared.lock().claim(pid, since),
            None,
            "a reused pid's exit"
        );
        assert!(
            svc.shared.lock().unclaimed.is_empty(),
            "the stale exit is dropped"
        );
        // It dies before its owner puts it in the table: kept, then claimed.
        svc.shared.exited(pid, 137);
        assert_eq!(svc.shared.lock().claim(pid, since), Some(137));
        assert_eq!(svc.shared.lock().claim(pid, since), None, "claimed once");
    }

    /// A signal to an exec never started is refused: its pid is 0, and kill(0, …)
    /// would signal the shim's own process group (every pod's, with one per node).
    #[test]
    fn a_signal_to_an_exec_not_started_is_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (svc, _events) = Service::new("test", None, None);
        with_running(&svc, "c", i32::MAX - 4);
        svc.shared
            .lock()
            .containers
            .get_mut("c")
            .unwrap()
            .execs
            .insert("e1".into(), Proc::new(Paths::default()));
        let req = api::KillRequest {
            id: "c".into(),
            exec_id: "e1".into(),
            // Signal 0: with the old bug, kill(0, 0) succeeded on our own group.
            signal: 0,
            ..Default::default()
        };
        let e = rt
            .block_on(svc.kill(&TtrpcContext::default(), req))
            .unwrap_err();
        assert!(e.to_string().contains("was not started"), "{e}");
    }

    /// `Shutdown` of a pod's shim stops it at once when it holds no container; a
    /// node's shim only if it still holds none after its linger.
    #[test]
    fn a_node_shim_stops_only_after_its_linger_with_no_container() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ctx = TtrpcContext::default();
        let stopped = |svc: &Service, within: std::time::Duration| {
            let svc = svc.clone();
            async move {
                tokio::time::timeout(within, svc.shared.stop.notified())
                    .await
                    .is_ok()
            }
        };
        let ms = std::time::Duration::from_millis;
        rt.block_on(async {
            let (pod, _events) = Service::new("test", None, None);
            pod.shutdown(&ctx, Default::default()).await.unwrap();
            assert!(stopped(&pod, ms(10)).await, "a pod's shim stops at once");

            let (node, _events) = Service::new("test", None, Some(ms(200)));
            node.shutdown(&ctx, Default::default()).await.unwrap();
            assert!(!stopped(&node, ms(50)).await, "stopped within its linger");
            assert!(stopped(&node, ms(1000)).await, "still up past its linger");

            // A container arriving within the linger keeps it up.
            let (node, _events) = Service::new("test", None, Some(ms(100)));
            node.shutdown(&ctx, Default::default()).await.unwrap();
            with_running(&node, "late", i32::MAX - 3);
            assert!(!stopped(&node, ms(400)).await, "stopped with a container");

            // So does a create under way, and a create or connect within the linger
            // before its end.
            let (node, _events) = Service::new("test", None, Some(ms(100)));
            let creating = service::Creating::new(&node.shared);
            node.shutdown(&ctx, Default::default()).await.unwrap();
            assert!(!stopped(&node, ms(300)).await, "stopped during a create");
            drop(creating);
            node.shutdown(&ctx, Default::default()).await.unwrap();
            tokio::time::sleep(ms(60)).await;
            node.connect(&ctx, Default::default()).await.unwrap();
            assert!(
                !stopped(&node, ms(80)).await,
                "stopped 40 ms after a connect"
            );
            node.shutdown(&ctx, Default::default()).await.unwrap();
            assert!(stopped(&node, ms(1000)).await, "still up when idle");
        });
    }

    #[test]
    fn exec_ids_are_file_name_safe() {
        for ok in ["e1", "exec-1.a_b", &"x".repeat(128)] {
            assert!(check_exec_id("c", ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "a/b", "a b", &"x".repeat(129)] {
            assert!(check_exec_id("c", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn systemd_cgroup_comes_from_the_runc_options() {
        let opts = api::Options {
            systemd_cgroup: true,
            ..Default::default()
        };
        let any = Any {
            type_url: "containerd.runc.v1.Options".into(),
            value: opts.write_to_bytes().unwrap(),
            ..Default::default()
        };
        assert!(systemd_cgroup(&MessageField::some(any.clone())));
        let other = Any {
            type_url: "example.Other".into(),
            ..any
        };
        assert!(!systemd_cgroup(&MessageField::some(other)));
        assert!(!systemd_cgroup(&MessageField::none()));
    }
}
