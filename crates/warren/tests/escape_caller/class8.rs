//! Class 8 (issue 14): per-zone kernel counters.

use super::*;

fn state_base(env: &Env, zone: &str) -> u64 {
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.root().join("zones").join(zone).join("state.json")).unwrap(),
    )
    .unwrap();
    state["idmap"]["base"]
        .as_u64()
        .unwrap_or_else(|| panic!("zone {zone} has no id range in state.json: {state}"))
}

const INOTIFY_FILL: &str = r#"
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print("opened=%d errno=%d" % (len(fds), ctypes.get_errno()), flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
"#;

const MQ_FILL: &str = r#"
import ctypes, os, sys, time
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
n = 0
err = 0
while n < 1000:
    q = rt.mq_open(("/%s%d" % (sys.argv[1], n)).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        err = ctypes.get_errno()
        break
    n += 1
print("queues=%d errno=%d" % (n, err), flush=True)
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
for i in range(n):
    rt.mq_unlink(("/%s%d" % (sys.argv[1], i)).encode())
"#;

/// Start `warren login zone -- python3 -c code args` and return it with its first line.
fn hold_in_zone(env: &Env, zone: &str, code: &str, args: &[&str]) -> (Child, String) {
    use std::io::BufRead;
    let mut c = env.cmd();
    c.args(["login", zone, "--", "python3", "-c", code])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Child(c.spawn().unwrap());
    let out = child.0.stdout.take().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(out).read_line(&mut line).unwrap();
    (child, line.trim().to_string())
}

fn host_inotify() -> Result<(), i32> {
    // SAFETY: inotify_init1 takes flags only; the new descriptor is closed at once.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    Ok(())
}

fn host_mq(name: &str) -> Result<(), i32> {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name, plain flags, no attributes; the queue is closed
    // and removed at once.
    let q = unsafe {
        libc::mq_open(
            c.as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_EXCL | libc::O_CLOEXEC,
            0o600 as libc::mode_t,
            std::ptr::null::<libc::mq_attr>(),
        )
    };
    if q < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `q` is the queue just opened; the name is ours.
    unsafe {
        libc::mq_close(q);
        libc::mq_unlink(c.as_ptr());
    }
    Ok(())
}

fn ns_owner(pid: i32) -> Option<u32> {
    let f = File::open(format!("/proc/{pid}/ns/user")).ok()?;
    let mut uid: libc::uid_t = 0;
    // SAFETY: NS_GET_OWNER_UID (_IO(0xb7, 0x4)) writes one uid_t into `uid`.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), 0xb704, &mut uid as *mut libc::uid_t) };
    (rc == 0).then_some(uid)
}

#[test]
fn class8_per_zone_kernel_counters() {
    require_root();
    let env = Env::new();
    env.host_zone("ca", &[]);
    env.host_zone("cb", &[]);
    env.ok(&["boot", "ca"]);
    env.ok(&["boot", "cb"]);
    let mut t = Table::new("8 counters");
    let (base_a, base_b) = (state_base(&env, "ca"), state_base(&env, "cb"));
    let (ia, ib) = (env.init_pid("ca"), env.init_pid("cb"));

    let (oa, ob) = (ns_owner(ia), ns_owner(ib));
    t.row(
        "zone A's user namespace owner (NS_GET_OWNER_UID)",
        "A's own base uid, not root",
        oa == Some(base_a as u32),
        format!("owner {oa:?} base {base_a}"),
    );
    t.row(
        "zone B's user namespace owner",
        "B's own base uid, not A's",
        ob == Some(base_b as u32) && ob != oa,
        format!("owner {ob:?} base {base_b}"),
    );
    let uid_of = |pid: i32| {
        std::fs::metadata(format!("/proc/{pid}"))
            .map(|m| m.uid())
            .ok()
    };
    t.row(
        "A's and B's init, as the host sees them (/proc/<init> owner)",
        "each its own base uid, different",
        uid_of(ia) == Some(base_a as u32) && uid_of(ib) == Some(base_b as u32) && base_a != base_b,
        format!("A {:?} B {:?}", uid_of(ia), uid_of(ib)),
    );

    // Filling A's counters would fill host root's if A's namespace were root's: then
    // the fills are not run (they would starve the host's other processes).
    if oa != Some(base_a as u32) || oa == Some(0) {
        t.row(
            "A fills inotify instances and message queues",
            "not run: A's namespace is not owned by A's own uid",
            false,
            format!("owner {oa:?}"),
        );
        t.finish();
        return;
    }

    // inotify instances.
    assert_eq!(
        host_inotify(),
        Ok(()),
        "the host cannot create an inotify instance even before the test (fs.inotify.max_user_instances exhausted by something else)"
    );
    let limit: i64 = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (holder, line) = hold_in_zone(&env, "ca", INOTIFY_FILL, &["30"]);
    let opened: i64 = field(&line, "opened")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "A opens inotify instances until failure (and holds them)",
        "stops at its own limit (EMFILE)",
        field(&line, "errno") == Some("24") && opened > 0 && opened <= limit,
        format!("{line} (max_user_instances {limit})"),
    );
    let rb = env.run(&["login", "cb", "--", "python3", "-c", INOTIFY_FILL]);
    let opened_b: i64 = field(&rb.stdout, "opened")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.run_row(
        "B opens inotify instances while A holds its limit",
        "B gets its own full quota",
        opened_b > 0 && opened_b + 8 >= opened,
        &rb,
    );
    let h = host_inotify();
    t.row(
        "host root inotify_init while A holds its limit",
        "succeeds",
        h.is_ok(),
        format!("{h:?}"),
    );
    drop(holder);

    // POSIX message queues (RLIMIT_MSGQUEUE bytes).
    let (holder, line) = hold_in_zone(&env, "ca", MQ_FILL, &["wq", "30"]);
    let qa: i64 = field(&line, "queues")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "A creates POSIX message queues until failure (and keeps them)",
        "stops at its own RLIMIT_MSGQUEUE (EMFILE)",
        field(&line, "errno") == Some("24") && qa > 0,
        &line,
    );
    let rb = env.run(&["login", "cb", "--", "python3", "-c", MQ_FILL, "wqb"]);
    let qb: i64 = field(&rb.stdout, "queues")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.run_row(
        "B creates message queues while A is full",
        "B gets its own full quota",
        qb > 0 && qb >= qa,
        &rb,
    );
    let name = format!("/warren-caller-{}", std::process::id());
    let h = host_mq(&name);
    t.row(
        "host root mq_open while A is full",
        "succeeds",
        h.is_ok(),
        format!("{h:?}"),
    );
    drop(holder);
    t.finish();
}
