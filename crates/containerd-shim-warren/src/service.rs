//! The state the task service ([`crate::task`]) works on: the containers and
//! processes of this shim, their exits, events to containerd, the helper runs.
//!
//! One shim serves a pod: `start` groups a container with its CRI sandbox (the
//! `io.kubernetes.cri.sandbox-id` annotation), so every container of a pod shares
//! one socket and one process; outside the CRI each container has its own. Every
//! container is a warren OCI container in the state root
//! `$WARREN_SHIM_ROOT/<namespace>` (default `/run/containerd/warren/<namespace>`),
//! visible to `warren --oci-root ... list`. The table here is in memory; what must
//! outlive the shim (the container's record and cgroups) is warren's record on disk,
//! and a containerd restart does not touch the shim: containerd reconnects to its
//! socket (the `address` file in the bundle) and asks for the state.
//!
//! Exits: the shim is its containers' subreaper; its reaper thread
//! ([`crate::bootstrap`]) waits for every child and each exit is recorded here
//! ([`Service::record_exits`], [`Shared::exited`]), which publishes `TaskExit` and
//! wakes whoever waits for an exit ([`Shared::exits`]): a `Wait`, a helper's run.
//! Both wait as tasks of the server's one thread, which serves other calls
//! meanwhile. An exit whose pid is not (yet) in the table — a helper, or a process
//! that exited before its pid was recorded — is kept in `unclaimed` until its owner
//! takes it.
//!
//! Events: [`Shared::publish`] only queues an event, in order, and never blocks; one
//! task on the server's runtime ([`Events::forward`]) sends them to containerd over
//! one connection, made again after a containerd restart.
//!
//! OOM: `TaskOOM` goes out when the kernel's OOM killer acts in a container's memory
//! cgroup while it runs ([`crate::oom`]'s watcher, one task for all containers)
//! and, if not yet published, before its init's `TaskExit`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::event::Envelope;
use containerd_shim::protos::shim::events::ForwardRequest;
use containerd_shim::protos::shim_async::{Client, EventsClient};
use containerd_shim::protos::ttrpc;
use tokio::sync::{mpsc, oneshot, Notify};
use warren::oci::{Ctx, Log};

use crate::helper::{Job, Verb};
use crate::oom::{self, Event};
use crate::stdio::{self, Console, Kept, Paths};

/// The environment variable naming the shim's state root (warren's OCI `--root`,
/// one directory per containerd namespace below it).
pub const ROOT_ENV: &str = "WARREN_SHIM_ROOT";
const DEFAULT_ROOT: &str = "/run/containerd/warren";
/// The CRI's annotation naming a container's pod sandbox.
const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// How the CRI's containers are grouped into shims, in containerd's environment
/// (shims inherit it): `pod` (the default: one shim per pod) or `node` (one shim
/// for every pod of the containerd namespace).
pub const GROUP_ENV: &str = "WARREN_SHIM_GROUP";
/// The group of every pod when [`GROUP_ENV`] is `node`.
const NODE_GROUP: &str = "warren-node";
/// How long a node's shim stays up with no container left (a new pod's first
/// container then finds it serving instead of racing its shutdown).
pub const NODE_LINGER: std::time::Duration = std::time::Duration::from_secs(30);

/// One shim per node ([`GROUP_ENV`] = `node`)?
pub fn per_node() -> bool {
    std::env::var(GROUP_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("node"))
}

/// The group a bundle's container is served in: its pod's (or, one shim per node,
/// every pod's) for a CRI container, None outside the CRI (its own shim).
pub fn group_of(bundle: &Path, per_node: bool) -> Option<String> {
    let pod = pod_of(bundle)?;
    Some(if per_node { NODE_GROUP.into() } else { pod })
}

/// warren's OCI state root for a containerd namespace.
pub fn root(namespace: &str) -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT))
        .join(namespace)
}

/// Nesting of container cgroups beneath the shim's own, as `warren oci` reads it
/// (`WARREN_OCI_CGROUP_NEST` in containerd's environment, which shims inherit).
pub fn cgroup_nest() -> bool {
    std::env::var(warren::oci::cgroup::NEST_ENV)
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
        .unwrap_or(false)
}

pub fn ctx(namespace: &str, systemd_cgroup: bool) -> Ctx {
    Ctx {
        root: root(namespace),
        log: Log::new(None, false, false),
        systemd_cgroup,
        cgroup_nest: cgroup_nest(),
        proc_root: PathBuf::from("/proc"),
    }
}

/// A ttrpc error with a gRPC code.
pub fn rpc_err(code: ttrpc::Code, msg: impl Into<String>) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg.into()))
}

/// warren's error, with its cause chain, as a ttrpc error.
pub fn warren_err(e: warren::Error) -> ttrpc::Error {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    let code = if msg.contains("does not exist") {
        ttrpc::Code::NOT_FOUND
    } else {
        ttrpc::Code::UNKNOWN
    };
    rpc_err(code, msg)
}

pub fn now() -> Timestamp {
    containerd_shim::util::timestamp().unwrap_or_default()
}

/// One process: a container's init or an exec.
pub struct Proc {
    /// 0 until started.
    pub pid: i32,
    pub paths: Paths,
    pub kept: Kept,
    pub exit: Option<(u32, Timestamp)>,
}

impl Proc {
    pub fn new(paths: Paths) -> Proc {
        Proc {
            pid: 0,
            paths,
            kept: Kept::default(),
            exit: None,
        }
    }
}

pub struct Container {
    pub bundle: PathBuf,
    pub init: Proc,
    pub execs: HashMap<String, Proc>,
    /// The rootfs mounts made at create (unmounted at delete).
    pub mounted: bool,
    /// Its cgroups, as create made them (read for OOM kills).
    pub cgroups: Option<warren::cgroups::CgroupSet>,
    /// TaskOOM events published for it.
    pub ooms_published: u64,
}

impl Container {
    pub fn proc(&self, exec_id: &str) -> Option<&Proc> {
        if exec_id.is_empty() {
            Some(&self.init)
        } else {
            self.execs.get(exec_id)
        }
    }
}

#[derive(Default)]
pub struct Table {
    pub containers: HashMap<String, Container>,
    /// Exits of pids not in the table (yet): pid → (status, its number in
    /// `exits_seen`).
    pub unclaimed: HashMap<i32, (i32, u64)>,
    /// Exits recorded so far: the number an unclaimed exit gets, so that an owner
    /// takes only one recorded after its process began ([`Table::claim`]).
    pub exits_seen: u64,
    /// `create`s under way (their container not in the table yet).
    pub creating: usize,
    /// When a `create` or `connect` last came: a node's shim stops only a linger
    /// after it (see [`Table::idle_for`]).
    pub last_call: Option<std::time::Instant>,
}

impl Table {
    /// The exit kept for `pid`, if it was recorded after `since` (`exits_seen` read
    /// before the process was started). An older entry belongs to an earlier process
    /// whose pid was reused, and is dropped.
    pub fn claim(&mut self, pid: i32, since: u64) -> Option<i32> {
        match self.unclaimed.remove(&pid) {
            Some((code, n)) if n > since => Some(code),
            _ => None,
        }
    }

    /// No container, none being created, and no create or connect for `linger`.
    pub fn idle_for(&self, linger: std::time::Duration) -> bool {
        self.containers.is_empty()
            && self.creating == 0
            && self.last_call.is_none_or(|at| at.elapsed() >= linger)
    }
}

/// Counts a `create` under way in the table while it lives.
pub struct Creating(pub Arc<Shared>);

impl Creating {
    pub fn new(shared: &Arc<Shared>) -> Creating {
        let mut t = shared.lock();
        t.creating += 1;
        t.last_call = Some(std::time::Instant::now());
        drop(t);
        Creating(shared.clone())
    }
}

impl Drop for Creating {
    fn drop(&mut self) {
        let mut t = self.0.lock();
        t.creating = t.creating.saturating_sub(1);
    }
}

/// Exits nobody claims (processes a container left behind) are forgotten past this.
const MAX_UNCLAIMED: usize = 4096;

pub struct Shared {
    pub table: Mutex<Table>,
    /// Notified (all waiters) on every recorded exit.
    pub exits: Notify,
    pub namespace: String,
    /// The queue of events to containerd ([`Events::forward`] sends them).
    events: mpsc::UnboundedSender<Outgoing>,
    /// Notified once by `Shutdown` when no container is left: the server stops.
    pub stop: Notify,
    /// How long to stay up with no container left (a node's shim), None: stop at
    /// once (a pod's).
    pub linger: Option<std::time::Duration>,
    /// The live OOM watcher (None if the kernel refused its epoll or inotify: then
    /// only the exit check reports OOM kills).
    pub oom: Option<Arc<oom::Watcher>>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue an event for containerd ([`Events::forward`] sends it). The event
    /// is packed by hand (`containerd.events.<Name>`): the protobuf descriptors a
    /// generic packing builds would cost every shim a few hundred KiB of heap.
    /// Events go out in the order of these calls.
    pub fn publish<M: Message>(&self, topic: &str, event: M) {
        let value = match event.write_to_bytes() {
            Ok(v) => v,
            Err(e) => return log::warn!("encoding {topic}: {e}"),
        };
        let req = ForwardRequest {
            envelope: MessageField::some(Envelope {
                timestamp: MessageField::some(now()),
                namespace: self.namespace.clone(),
                topic: topic.into(),
                event: MessageField::some(Any {
                    type_url: format!("containerd.events.{}", M::NAME),
                    value,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Fails only once the forwarding task has ended (the server stopped).
        if self.events.send(Outgoing::Event(req)).is_err() {
            log::warn!("publishing {topic}: the shim is stopping");
        }
    }

    /// Wait (bounded) until every event queued so far went out, or failed to.
    pub async fn flush_events(&self, bound: std::time::Duration) {
        let (done, sent) = oneshot::channel();
        if self.events.send(Outgoing::Flush(done)).is_ok()
            && tokio::time::timeout(bound, sent).await.is_err()
        {
            log::warn!("events to containerd still queued after {bound:?}: left");
        }
    }

    /// Wake whoever waits for an exit.
    pub fn wake(&self) {
        self.exits.notify_waiters();
    }

    /// Ask `look` of the table until it answers, waiting for the next recorded exit
    /// between two looks, or until `deadline` (then None). The wait is registered
    /// before each look, so an exit recorded after the look still wakes it.
    pub(crate) async fn until_exit<T>(
        &self,
        deadline: Option<tokio::time::Instant>,
        mut look: impl FnMut(&mut Table) -> Option<T>,
    ) -> Option<T> {
        loop {
            let mut exited = std::pin::pin!(self.exits.notified());
            exited.as_mut().enable();
            if let Some(answer) = look(&mut self.lock()) {
                return Some(answer);
            }
            match deadline {
                None => exited.await,
                Some(d) => tokio::time::timeout_at(d, exited).await.ok()?,
            }
        }
    }

    /// Record the exit of `pid` (from the reaper) and wake every waiter.
    pub(crate) fn exited(&self, pid: i32, code: i32) {
        let mut t = self.lock();
        t.exits_seen += 1;
        let at = now();
        let mut found = None;
        'outer: for (cid, c) in t.containers.iter_mut() {
            if c.init.pid == pid && c.init.exit.is_none() {
                c.init.exit = Some((code as u32, at.clone()));
                found = Some((cid.clone(), cid.clone()));
                break;
            }
            for (eid, p) in c.execs.iter_mut() {
                if p.pid == pid && p.exit.is_none() {
                    p.exit = Some((code as u32, at.clone()));
                    found = Some((cid.clone(), eid.clone()));
                    break 'outer;
                }
            }
        }
        match found {
            Some((container_id, id)) => {
                if container_id == id {
                    self.check_oom(&mut t, &container_id, None);
                }
                self.publish_exit(&container_id, &id, pid, code, at)
            }
            None => {
                if t.unclaimed.len() >= MAX_UNCLAIMED {
                    t.unclaimed.clear();
                }
                let n = t.exits_seen;
                t.unclaimed.insert(pid, (code, n));
            }
        }
        drop(t);
        self.wake();
    }

    /// `TaskOOM` for `container_id` if [`oom::decide`] says so: on the watcher's
    /// `event` while the container runs, and (`event` None) at its init's exit, before
    /// its `TaskExit`, when its memory cgroup (v1 `memory.oom_control`, v2
    /// `memory.events`, which outlive the init until `delete`) counted an OOM kill not
    /// published yet. The CRI then reports the container `OOMKilled`. Under the
    /// table's lock (`t`): the watcher and the exit never both publish one kill.
    pub fn check_oom(&self, t: &mut Table, container_id: &str, event: Option<Event>) {
        let Some(c) = t.containers.get_mut(container_id) else {
            return;
        };
        let kills = c.cgroups.as_ref().and_then(|set| set.oom_kills());
        let running = c.init.exit.is_none();
        if let Some(n) = oom::decide(event, kills, c.ooms_published, running) {
            c.ooms_published = n;
            use containerd_shim::protos::events::task::TaskOOM;
            self.publish(
                containerd_shim::protos::topics::TASK_OOM_EVENT_TOPIC,
                TaskOOM {
                    container_id: container_id.into(),
                    ..Default::default()
                },
            );
        }
    }

    pub fn publish_exit(&self, container_id: &str, id: &str, pid: i32, code: i32, at: Timestamp) {
        use containerd_shim::protos::events::task::TaskExit;
        self.publish(
            containerd_shim::protos::topics::TASK_EXIT_EVENT_TOPIC,
            TaskExit {
                container_id: container_id.into(),
                id: id.into(),
                pid: pid as u32,
                exit_status: code as u32,
                exited_at: MessageField::some(at),
                ..Default::default()
            },
        );
    }

    /// Run the helper for `job` with the process's stdio; its status is taken
    /// from the reaper's exits, waited for as a task.
    pub async fn run_helper(
        &self,
        job: &Job,
        (stdin, stdout, stderr): (
            std::process::Stdio,
            std::process::Stdio,
            std::process::Stdio,
        ),
    ) -> Result<(), String> {
        let _ = std::fs::remove_file(&job.error_file);
        let exe = std::env::current_exe().map_err(|e| format!("finding the shim binary: {e}"))?;
        let since = self.lock().exits_seen;
        let child = Command::new(&exe)
            .args(job.args())
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        let pid = child.id() as i32;
        drop(child);
        let Some(code) = self.until_exit(None, |t| t.claim(pid, since)).await else {
            unreachable!("until_exit answers None only at a deadline");
        };
        if code == 0 {
            return Ok(());
        }
        Err(std::fs::read_to_string(&job.error_file)
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| format!("the shim's helper exited with status {code}")))
    }
}

impl Service {
    /// Start a process through the helper: its stdio, the console of a terminal,
    /// the pid from its pid file.
    /// Also `exits_seen` from before the helper started: the process's exit, if it
    /// came before the caller put its pid in the table, is the unclaimed one
    /// recorded after that ([`Table::claim`]).
    pub async fn spawn(
        &self,
        ctx: &Ctx,
        id: &str,
        verb: Verb,
        paths: &Paths,
        name: &str,
        bundle: &Path,
    ) -> ttrpc::Result<(i32, Kept, u64)> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            rpc_err(
                ttrpc::Code::UNKNOWN,
                format!("container '{id}': {what}: {e}"),
            )
        };
        let stdio::Wired {
            stdin,
            stdout,
            stderr,
            mut kept,
        } = stdio::wire(paths).map_err(|e| failed("opening its stdio FIFOs", &e))?;
        let console = if paths.terminal {
            std::fs::create_dir_all(&ctx.root)
                .map_err(|e| failed("creating the state root", &e))?;
            // Short: a CRI id and exec id are 64 characters each, a socket path
            // at most 107 (SUN_LEN).
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let sock = ctx
                .root
                .join(format!(".console-{}-{n}", std::process::id()));
            Some(Console::listen(&sock).map_err(|e| failed("the console socket", &e))?)
        } else {
            None
        };
        let job = Job {
            verb,
            root: ctx.root.clone(),
            cgroup_nest: ctx.cgroup_nest,
            systemd_cgroup: ctx.systemd_cgroup,
            id: id.into(),
            pid_file: bundle.join(format!("{name}.pid")),
            error_file: bundle.join(format!("{name}.error")),
            console_socket: console.as_ref().map(|c| c.path.clone()),
        };
        let since = self.shared.lock().exits_seen;
        self.shared
            .run_helper(&job, (stdin, stdout, stderr))
            .await
            .map_err(|m| rpc_err(ttrpc::Code::UNKNOWN, m))?;
        let pid = std::fs::read_to_string(&job.pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .ok_or_else(|| failed("reading the pid file", &job.pid_file.display()))?;
        let _ = std::fs::remove_file(&job.pid_file);
        if let Some(c) = console {
            c.attach(paths, &mut kept)
                .map_err(|e| failed("taking the terminal from the console socket", &e))?;
        }
        Ok((pid, kept, since))
    }
}

/// What the events queue carries.
enum Outgoing {
    Event(ForwardRequest),
    /// Answered once every earlier entry was handled.
    Flush(oneshot::Sender<()>),
}

/// Time one event may take containerd to accept.
const FORWARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The forwarding end of the events queue, run as one task on the server's runtime.
pub struct Events {
    /// containerd's ttrpc address (`TTRPC_ADDRESS`), where events go.
    address: Option<String>,
    queue: mpsc::UnboundedReceiver<Outgoing>,
}

impl Events {
    /// Send each queued event to containerd, in order, over one connection. After
    /// a containerd restart the old connection is dead: connect again once and
    /// retry. Without an address the events are dropped.
    pub async fn forward(mut self) {
        let mut client: Option<EventsClient> = None;
        while let Some(out) = self.queue.recv().await {
            let req = match out {
                Outgoing::Event(req) => req,
                Outgoing::Flush(done) => {
                    let _ = done.send(());
                    continue;
                }
            };
            let Some(address) = self.address.as_deref() else {
                continue;
            };
            let topic = req.envelope.topic.clone();
            for attempt in 0..2 {
                if client.is_none() || attempt > 0 {
                    client = connect_events(address).await;
                }
                let Some(c) = client.as_ref() else {
                    log::warn!("publishing {topic}: containerd's {address} refuses");
                    break;
                };
                let ctx = ttrpc::context::with_timeout(FORWARD_TIMEOUT.as_nanos() as i64);
                match c.forward(ctx, &req).await {
                    Ok(_) => break,
                    Err(e) => log::warn!("publishing {topic}: {e}"),
                }
            }
        }
    }
}

/// A client of containerd's event service at `address` (a path, or `unix://`
/// and a path).
async fn connect_events(address: &str) -> Option<EventsClient> {
    let path = address.strip_prefix("unix://").unwrap_or(address);
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .inspect_err(|e| log::warn!("connecting to containerd's events at {path}: {e}"))
        .ok()?;
    let socket = ttrpc::asynchronous::transport::Socket::from(stream);
    Some(EventsClient::new(Client::new(socket)))
}

impl Service {
    /// Record each exit the reaper reports (pid, status) until it stops: a task of
    /// the server's runtime. The reaper itself never takes the table's lock.
    pub async fn record_exits(self, mut reaped: mpsc::UnboundedReceiver<(i32, i32)>) {
        while let Some((pid, code)) = reaped.recv().await {
            self.shared.exited(pid, code);
        }
    }

    /// Watch the containers' memory cgroups for OOM kills (nothing without a
    /// watcher): a task of the server's runtime.
    pub async fn watch_ooms(self) {
        let Some(watcher) = self.shared.oom.clone() else {
            return;
        };
        watcher
            .watch(|id, event| {
                let mut t = self.shared.lock();
                self.shared.check_oom(&mut t, id, Some(event));
            })
            .await;
    }
}

/// The task service's handle (cheap to clone).
#[derive(Clone)]
pub struct Service {
    pub shared: Arc<Shared>,
}

/// The pod a bundle's container belongs to (its CRI sandbox id), if any.
pub fn pod_of(bundle: &Path) -> Option<String> {
    let text = std::fs::read_to_string(bundle.join("config.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v.get("annotations")?.get(SANDBOX_ID)?.as_str()?.to_string())
}

/// Unmount whatever create mounted on `<bundle>/rootfs`.
pub fn unmount_rootfs(bundle: &Path) {
    let rootfs = bundle.join("rootfs");
    if let Some(p) = rootfs.to_str() {
        let _ = containerd_shim::mount::umount_recursive(Some(p), warren_sys::libc::MNT_DETACH);
    }
}

impl Service {
    /// The task service of namespace `namespace`, and the sender of its events to
    /// `events_address` (to run on the server's runtime); `linger`: see
    /// [`Shared::linger`].
    pub fn new(
        namespace: &str,
        events_address: Option<String>,
        linger: Option<std::time::Duration>,
    ) -> (Service, Events) {
        let (events, queue) = mpsc::unbounded_channel();
        let oom = oom::Watcher::new()
            .inspect_err(|e| {
                log::warn!(
                    "no live OOM watcher: {e}; OOM kills are reported at the container's exit"
                )
            })
            .ok();
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            exits: Notify::new(),
            namespace: namespace.into(),
            events,
            stop: Notify::new(),
            linger,
            oom,
        });
        let events = Events {
            address: events_address,
            queue,
        };
        (Service { shared }, events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_its_cri_sandbox_annotation() {
        let dir = std::env::temp_dir().join(format!("warren-shim-pod-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |v: serde_json::Value| {
            std::fs::write(dir.join("config.json"), v.to_string()).unwrap();
        };
        write(serde_json::json!({"annotations": {SANDBOX_ID: "pod1"}}));
        let pod = pod_of(&dir);
        let groups = (group_of(&dir, false), group_of(&dir, true));
        write(serde_json::json!({"ociVersion": "1.0.2"}));
        let none = pod_of(&dir);
        let no_groups = (group_of(&dir, false), group_of(&dir, true));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(pod.as_deref(), Some("pod1"));
        assert_eq!(none, None);
        // One shim per pod, or per node for every pod; outside the CRI its own.
        assert_eq!(groups, (Some("pod1".into()), Some(NODE_GROUP.into())));
        assert_eq!(no_groups, (None, None));
    }

    #[test]
    fn warren_errors_keep_their_message() {
        let e = warren_err(warren::Error::Invalid("container 'c': bad".into()));
        assert!(e.to_string().contains("container 'c': bad"), "{e}");
    }
}
