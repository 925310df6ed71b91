//! The shim binary's actions, as containerd runs them (`containerd-shim-warren-v1
//! -namespace N -id ID -address A [-debug] start|delete`, and the server itself with
//! `-socket`).
//!
//! containerd-shim 0.12's own bootstrap does not fit containerd 1.6 (Debian 12's),
//! so the actions are here, on the crate's parts: its `start` reply is a JSON
//! document that only containerd 1.7+ reads (1.6 wants the bare address), and its
//! server registers the task service as `containerd.task.v3.Task` only (containerd
//! 2.x's name; 1.6 and 1.7 call `containerd.task.v2.Task`, the same messages). The
//! server here answers to both names.
//!
//! - `start`: find the socket of the container's group (its pod's, or every pod's
//!   with one shim per node: [`service::group_of`]); if a server already listens
//!   there, answer with it; otherwise bind and listen on it here and start the
//!   server (this binary, in a process group of its own so a signal to
//!   containerd's group does not reach it) with the listening socket as its stdin
//!   ([`LISTENER_ENV`]), write `address` in
//!   the bundle (containerd reads it again after a restart) and answer at once:
//!   containerd's first calls wait in the socket's backlog while the server starts,
//!   instead of `start` waiting for the server before it answers. The probe, bind
//!   and listen are taken under the socket's lock, held until the server is spawned,
//!   so that two `start`s of one pod cannot both serve ([`socket`]); a lock held
//!   past [`socket::LOCK_WAIT`] fails the `start`, naming its holder.
//! - the server: subreaper of its containers; one thread reaps every child (woken
//!   by SIGCHLD, which every thread blocks) and hands each exit to the task
//!   service (and to containerd-shim's monitor, for its own waits); everything else
//!   on one thread, a tokio runtime of one thread: ttrpc on the socket until
//!   `Shutdown`, every connection and call, the events to containerd, the OOM
//!   watch. Two threads in all, however many containers, connections and waits
//!   the pod has (a third for a second after a `delete`, see [`crate::task`]; the
//!   stdio copies of a process with stdin or a terminal, [`crate::stdio`]).
//! - `delete`: containerd's cleanup after a shim died: the container is removed
//!   (what is left of it killed), its rootfs unmounted, and the pod's socket and
//!   lock file removed if no server serves them ([`socket::clean_stale`]).

use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use containerd_shim::api::DeleteResponse;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim_async::{create_task, Task};
use containerd_shim::protos::ttrpc::asynchronous::transport::Listener;
use containerd_shim::protos::ttrpc::asynchronous::Server;
use containerd_shim::Flags;

use crate::service::{self, Service};
use crate::socket::{self, Claim, Released, SocketFile};
use crate::RUNTIME_ID;

/// Set (to "stdin") in a server's environment by `start`: its stdin is the socket,
/// already listening.
pub const LISTENER_ENV: &str = "WARREN_SHIM_LISTENER";

/// Set by `start` beside [`LISTENER_ENV`]: the socket file it bound
/// ([`SocketFile::encode`]), which the server removes at its shutdown only if the
/// path still names it.
pub const SOCKET_FILE_ENV: &str = "WARREN_SHIM_SOCKET_FILE";

fn socket_path(address: &str) -> &str {
    address.strip_prefix("unix://").unwrap_or(address)
}

/// The socket of the container's group: its pod's (or the node's, see
/// [`service::GROUP_ENV`]), or its own outside a pod (run in the bundle, as
/// containerd runs `start` and `delete`).
fn group_address(flags: &Flags) -> String {
    let grouping =
        service::group_of(Path::new("."), service::per_node()).unwrap_or_else(|| flags.id.clone());
    containerd_shim::socket_address(&flags.address, &flags.namespace, &grouping)
}

fn fail(flags: &Flags, what: &str, e: impl std::fmt::Display) -> i32 {
    eprintln!("{RUNTIME_ID}: container '{}': {what}: {e}", flags.id);
    1
}

/// The `start` action: the address on stdout.
pub fn start(flags: &Flags) -> i32 {
    use std::io::{Read, Write};
    // containerd writes the runtime options (a protobuf Any) on stdin: read them so
    // it never blocks; CreateTask carries them again.
    let _ = std::io::stdin().take(1 << 20).read_to_end(&mut Vec::new());
    let address = group_address(flags);
    let path = Path::new(socket_path(&address));
    let claim = match socket::claim(path, || warren::fault::pause("shim.start-before-listen")) {
        Ok(c) => c,
        Err(e) => return fail(flags, "claiming the pod's shim socket", e),
    };
    // Ours: the lock is held until the server has the listening socket, so that no
    // other `start` decides about the path meanwhile.
    if let Claim::Bound {
        listener,
        lock,
        socket: file,
    } = claim
    {
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => {
                socket::abandon(path, lock);
                return fail(flags, "finding the shim binary", e);
            }
        };
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["-namespace", &flags.namespace, "-id", &flags.id])
            .args(["-address", &flags.address, "-socket", &address])
            .env(LISTENER_ENV, "stdin")
            .env(SOCKET_FILE_ENV, file.encode())
            .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
                listener,
            )))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // One malloc arena: the server's threads mostly sleep, and an arena per
            // thread is up to a few hundred KiB of anonymous memory per shim.
            .env("MALLOC_ARENA_MAX", "1")
            .process_group(0);
        if flags.debug {
            cmd.arg("-debug");
        }
        // The server outlives this process (reparented to containerd's subreaper or
        // init); a server that dies before serving closes the socket, and
        // containerd's first call on it fails.
        if let Err(e) = cmd.spawn() {
            socket::abandon(path, lock);
            return fail(flags, "starting the shim server", e);
        }
        drop(lock);
    }
    if let Err(e) = containerd_shim::synchronous::util::write_address(&address) {
        return fail(flags, "writing the bundle's address file", e);
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(address.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => fail(flags, "answering containerd", e),
    }
}

/// The `delete` action: a DeleteResponse on stdout.
pub fn delete(flags: &Flags) -> i32 {
    let ctx = service::ctx(&flags.namespace, false);
    if let Err(e) = warren::oci::ops::delete(&ctx, &flags.id, true) {
        eprintln!("{RUNTIME_ID}: container '{}': delete: {e}", flags.id);
    }
    service::unmount_rootfs(Path::new("."));
    // containerd runs `delete` after a shim died: a dead server's socket and lock
    // file are removed (left if a server serves them, or a `start` holds the lock).
    let address = group_address(flags);
    if let Err(e) = socket::clean_stale(Path::new(socket_path(&address))) {
        eprintln!(
            "{RUNTIME_ID}: container '{}': removing a dead server's socket {address}: {e}",
            flags.id
        );
    }
    let r = DeleteResponse {
        exit_status: 128 + 9,
        exited_at: MessageField::some(service::now()),
        ..Default::default()
    };
    let mut out = std::io::stdout().lock();
    match r.write_to_writer(&mut out) {
        Ok(()) => 0,
        Err(e) => fail(flags, "answering containerd", e),
    }
}

/// Reap every child; each exit goes to containerd-shim's monitor (its own waits:
/// the rootfs mount's child) and to the server's runtime (`exits`), where the task
/// service records it. The reaper never waits for the table's lock: a verb holding
/// it may be waiting for a reaped process. It stops when the runtime has.
///
/// SIGCHLD is blocked in every thread of the server ([`serve`] blocks it before
/// the first thread starts), so it stays pending until the reaper takes it: the
/// reaper takes every exited child, then waits for the next SIGCHLD. A child that
/// exits between the two leaves the signal pending, so none waits; and a shim with
/// no child at all (a new one, before its first create) is woken by the first
/// child's exit — the rootfs mount's, the helper's — instead of finding it on a
/// poll round later (a 20 ms sleep per round cost every new pod up to 40 ms).
fn reap(exits: tokio::sync::mpsc::UnboundedSender<(i32, i32)>) {
    loop {
        match warren_sys::proc::waitpid_nohang(-1) {
            Ok(Some((pid, status))) => {
                let _ = containerd_shim::monitor::monitor_notify_by_pid(pid, status.code());
                if exits.send((pid, status.code())).is_err() {
                    return;
                }
            }
            // Children that still run, or none: wait for the next exit. The bound
            // only guards against a lost wake-up.
            Ok(None) | Err(_) => {
                let _ = warren_sys::signal::wait_for(
                    &[warren_sys::libc::SIGCHLD],
                    Duration::from_secs(1),
                );
            }
        }
    }
}

/// The server: ttrpc on `flags.socket` until Shutdown.
pub fn serve(flags: &Flags) -> i32 {
    // Before any thread: every thread inherits the mask, and the reaper takes
    // SIGCHLD synchronously (see [`reap`]). Children get an empty mask (std's
    // spawn resets it).
    if let Err(e) = warren_sys::signal::block(&[warren_sys::libc::SIGCHLD]) {
        return fail(flags, "blocking SIGCHLD for the reaper", e);
    }
    if let Err(e) = warren_sys::proc::set_child_subreaper() {
        return fail(flags, "becoming the containers' subreaper", e);
    }
    if let Err(e) = crate::logfifo::init(flags.debug) {
        eprintln!("{RUNTIME_ID}: the log FIFO: {e}");
    }
    // Debug lines that time a pod's start (`warren bench cri --breakdown` reads them
    // from containerd's log, where containerd copies the shim's).
    log::debug!("shim server up, pid {}", std::process::id());
    let path = Path::new(socket_path(&flags.socket));
    let (listener, own) = if std::env::var_os(LISTENER_ENV).is_some_and(|v| v == "stdin") {
        // `start` bound it: the socket is our stdin, its file named in the
        // environment (else the path's file now: it listens, so nobody replaced it).
        use std::os::fd::AsFd;
        let own = std::env::var(SOCKET_FILE_ENV)
            .ok()
            .and_then(|v| SocketFile::parse(&v))
            .or_else(|| SocketFile::at(path).ok());
        match std::io::stdin().as_fd().try_clone_to_owned() {
            Ok(fd) => (UnixListener::from(fd), own),
            Err(e) => return fail(flags, "taking the listening socket from stdin", e),
        }
    } else {
        match socket::claim(path, || {}) {
            // Listening: the lock may go.
            Ok(Claim::Bound {
                listener, socket, ..
            }) => (listener, Some(socket)),
            // Another server of this group got there first: it serves.
            Ok(Claim::Serving) => return 0,
            Err(e) => return fail(flags, "listening on the shim socket", e),
        }
    };
    let events = std::env::var("TTRPC_ADDRESS").ok();
    // A node's shim outlives its last pod a while; a pod's stops with it.
    let linger = service::per_node().then_some(service::NODE_LINGER);
    let (service, events) = Service::new(&flags.namespace, events, linger);
    let shared = service.shared.clone();
    let (exits, reaped) = tokio::sync::mpsc::unbounded_channel();
    if let Err(e) = std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || reap(exits))
    {
        return fail(flags, "starting the reaper", e);
    }
    let task: Arc<dyn Task + Send + Sync> = Arc::new(service.clone());
    let mut services = create_task(task.clone());
    services.extend(create_task(task).into_iter().map(|(name, s)| {
        (
            name.replace("containerd.task.v3.", "containerd.task.v2."),
            s,
        )
    }));
    // One thread serves every connection and call, and runs the events' sender,
    // the exits' recording and the OOM watch; what waits (`Wait`, a helper's run)
    // waits as a task (see [`crate::task`]).
    // Blocking work (a `delete`'s kill and cgroup removal) runs on a thread of
    // tokio's pool, which goes again a second after its last job.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_keep_alive(Duration::from_secs(1))
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(flags, "the server's runtime", e),
    };
    let served = runtime.block_on(async {
        tokio::spawn(events.forward());
        tokio::spawn(service.clone().record_exits(reaped));
        tokio::spawn(service.watch_ooms());
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixListener::from_std(listener))
            .map_err(|e| ("the listening socket", e.to_string()))?;
        let mut server = Server::new()
            .add_listener(Listener::from(listener))
            .register_service(services);
        server
            .start()
            .await
            .map_err(|e| ("starting the ttrpc server", e.to_string()))?;
        log::debug!("shim server listening");
        shared.stop.notified().await;
        // The last events (the containers' TaskDelete) go out before the server stops.
        shared.flush_events(Duration::from_secs(2)).await;
        Ok::<_, (&str, String)>(server)
    });
    let mut server = match served {
        Ok(s) => s,
        Err((what, e)) => return fail(flags, what, e),
    };
    // The socket is given up while it still listens: the path is then surely this
    // server's if it names its socket file (a `start` replaces only a socket that
    // refuses). The wait for the lock is bounded; past it, the socket goes and the
    // lock file stays (see `socket`).
    match own.map(|own| socket::release(path, own, socket::LOCK_WAIT)) {
        Some(Ok(Released::Removed)) => {}
        Some(Ok(Released::NotOurs)) => log::warn!(
            "the shim socket {} is no longer this server's: left",
            path.display()
        ),
        Some(Err(e)) => log::warn!("giving up the shim socket {}: {e}", path.display()),
        None => log::warn!(
            "the shim socket {}: its file was not known, left",
            path.display()
        ),
    }
    // Bounded: ttrpc waits at most 10 s for the connections' tasks.
    if let Err(e) = runtime.block_on(server.shutdown()) {
        log::warn!("stopping the ttrpc server: {e}");
    }
    0
}
