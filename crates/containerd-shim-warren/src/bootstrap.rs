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
//! - `start`: find the socket of the container's group (its pod's, see
//!   [`service::pod_of`]); if a server already listens there, answer with it;
//!   otherwise start the server (this binary, in a process group of its own so a
//!   signal to containerd's group does not reach it), wait until it listens, write
//!   `address` in the bundle (containerd reads it again after a restart) and answer.
//! - the server: subreaper of its containers; one thread reaps every child and
//!   hands each exit to containerd-shim's monitor, the task service's watcher
//!   records it; ttrpc on the socket until `Shutdown`.
//! - `delete`: containerd's cleanup after a shim died: the container is removed
//!   (what is left of it killed) and its rootfs unmounted.

use std::os::fd::IntoRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use containerd_shim::api::DeleteResponse;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim_sync::create_task;
use containerd_shim::protos::ttrpc::Server;
use containerd_shim::{ExitSignal, Flags};

use crate::service::{self, Service};
use crate::RUNTIME_ID;

/// The most ttrpc workers per connection (containerd keeps one per shim).
const WORKERS_MAX: usize = 256;

/// How long `start` waits for a new server to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

fn socket_path(address: &str) -> &str {
    address.strip_prefix("unix://").unwrap_or(address)
}

fn fail(flags: &Flags, what: &str, e: impl std::fmt::Display) -> i32 {
    eprintln!("{RUNTIME_ID}: container '{}': {what}: {e}", flags.id);
    1
}

/// Whether a server answers on the socket.
fn listening(path: &str) -> bool {
    UnixStream::connect(path).is_ok()
}

/// The `start` action: the address on stdout.
pub fn start(flags: &Flags) -> i32 {
    use std::io::{Read, Write};
    // containerd writes the runtime options (a protobuf Any) on stdin: read them so
    // it never blocks; CreateTask carries them again.
    let _ = std::io::stdin().take(1 << 20).read_to_end(&mut Vec::new());
    let grouping = service::pod_of(Path::new(".")).unwrap_or_else(|| flags.id.clone());
    let address = containerd_shim::socket_address(&flags.address, &flags.namespace, &grouping);
    let path = socket_path(&address).to_string();
    if !listening(&path) {
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => return fail(flags, "finding the shim binary", e),
        };
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["-namespace", &flags.namespace, "-id", &flags.id])
            .args(["-address", &flags.address, "-socket", &address])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // One malloc arena: the server's threads mostly sleep, and an arena per
            // thread is up to a few hundred KiB of anonymous memory per shim.
            .env("MALLOC_ARENA_MAX", "1")
            .process_group(0);
        if flags.debug {
            cmd.arg("-debug");
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return fail(flags, "starting the shim server", e),
        };
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        while !listening(&path) {
            if let Ok(Some(st)) = child.try_wait() {
                return fail(flags, "the shim server exited", st);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return fail(flags, "the shim server did not listen", &path);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
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

/// Reap every child; each exit goes to containerd-shim's monitor, whose
/// subscriber (the task service's watcher) records it. The reaper never waits
/// for the table's lock: a verb holding it may be waiting for a reaped process.
fn reap() {
    loop {
        match warren_sys::proc::wait_any() {
            Ok((pid, status)) => {
                let _ = containerd_shim::monitor::monitor_notify_by_pid(pid, status.code());
            }
            // No child yet (or any more): nothing can exit until one is started.
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The server: ttrpc on `flags.socket` until Shutdown.
pub fn serve(flags: &Flags) -> i32 {
    if let Err(e) = warren_sys::proc::set_child_subreaper() {
        return fail(flags, "becoming the containers' subreaper", e);
    }
    if let Err(e) = containerd_shim::logger::init(flags.debug, "info", &flags.namespace, &flags.id)
    {
        eprintln!("{RUNTIME_ID}: the log FIFO: {e}");
    }
    let path = socket_path(&flags.socket).to_string();
    if let Some(dir) = Path::new(&path).parent() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return fail(flags, "creating the socket directory", e);
        }
    }
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        // Another server of this group got there first: it serves.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && listening(&path) => return 0,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let _ = std::fs::remove_file(&path);
            match UnixListener::bind(&path) {
                Ok(l) => l,
                Err(e) => return fail(flags, "listening on the shim socket", e),
            }
        }
        Err(e) => return fail(flags, "listening on the shim socket", e),
    };
    let events = std::env::var("TTRPC_ADDRESS").ok();
    let exit = Arc::new(ExitSignal::default());
    let service = Service::new(&flags.namespace, events, exit.clone());
    std::thread::spawn(reap);
    let task: Arc<dyn containerd_shim::Task + Send + Sync> = Arc::new(service);
    let mut methods = create_task(task.clone());
    for (name, handler) in create_task(task) {
        methods.insert(
            name.replace("/containerd.task.v3.", "/containerd.task.v2."),
            handler,
        );
    }
    // ttrpc's workers per connection: two idle, more while calls block (each Wait
    // holds one until its process exits), so a pod's waits never starve a Kill.
    let server = Server::new()
        .set_thread_count_default(2)
        .set_thread_count_min(1)
        .set_thread_count_max(WORKERS_MAX)
        .add_listener(listener.into_raw_fd())
        .map(|s| s.register_service(methods));
    let mut server = match server {
        Ok(s) => s,
        Err(e) => return fail(flags, "the ttrpc server", e),
    };
    if let Err(e) = server.start() {
        return fail(flags, "starting the ttrpc server", e);
    }
    exit.wait();
    server.shutdown();
    let _ = std::fs::remove_file(&path);
    0
}
