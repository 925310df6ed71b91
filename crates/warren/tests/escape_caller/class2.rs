//! Class 2 (issue 14): the caller's terminal.

use super::*;

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat.
fn stat_field(pid: i32, n: usize) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

/// Reports, on one line, what the process holds: its fds 0-2, whether /dev/tty opens,
/// whether it leads its own session and its tty_nr, `tty`'s answer, fd 0's device
/// against the zone's devpts, and the result of TIOCSTI on 0, 1 and 2 with the line
/// `touch <argv[1]>`. With argv[2] it first sleeps that long (ignoring SIGHUP, as a
/// process left behind would), with argv[3] it writes the report there.
const TERM_REPORT: &str = r#"
import fcntl, os, signal, subprocess, sys, termios, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
r = []
for fd in (0, 1, 2):
    try:
        r.append("fd%d=%s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
    except OSError as e:
        r.append("fd%d=errno%d" % (fd, e.errno))
try:
    os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    r.append("devtty=opened")
except OSError as e:
    r.append("devtty=errno%d" % e.errno)
st = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
r.append("leader=%s ttynr=%s" % ("yes" if int(st[3]) == os.getpid() else "no:" + st[3], st[4]))
try:
    r.append("tty=" + subprocess.run(["tty"], capture_output=True, text=True).stdout.strip().replace(" ", "_"))
except OSError as e:
    r.append("tty=errno%d" % e.errno)
try:
    s0 = os.fstat(0)
    r.append("fd0rdev=%d fd0dev=%d ptsdev=%d" % (s0.st_rdev, s0.st_dev, os.stat("/dev/pts").st_dev))
except OSError as e:
    r.append("fd0stat=errno%d" % e.errno)
line = ("touch " + sys.argv[1] + "\n").encode()
for fd in (0, 1, 2):
    try:
        for ch in line:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
        r.append("sti%d=injected" % fd)
    except OSError as e:
        r.append("sti%d=errno%d" % (fd, e.errno))
text = " ".join(r) + "\n"
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(text)
else:
    sys.stdout.write(text)
    sys.stdout.flush()
"#;

/// One run under a real terminal (`script`), as an admin's shell would do it: `inner`
/// runs in bash on the pty (with $W, $CODE, $MARK, $T set), then the "shell" reads a
/// line from the terminal for `read_secs` and evaluates it, as an interactive shell
/// would after login returns.
struct TermRun {
    /// What the terminal showed (script's output).
    screen: String,
    /// What the host shell read from the terminal after the command.
    host_read: String,
    /// Whether the injected `touch MARK` ran on the host.
    marker_ran: bool,
    /// The caller's terminal (the pty script made) as (filesystem, device), read while
    /// it existed.
    caller_tty: Option<(u64, u64)>,
    /// Report written by the command to $T/out-<n>, if redirected there.
    out: String,
}

fn under_terminal(env: &Env, t: &Path, n: usize, inner: &str, read_secs: u32) -> TermRun {
    let mark = t.join(format!("injected-{n}"));
    let out = t.join(format!("out-{n}"));
    let hostread = t.join(format!("hostread-{n}"));
    let ttyf = t.join(format!("tty-{n}"));
    let screen = t.join(format!("screen-{n}"));
    let body = format!(
        "stat -L -c \"%n %d %t %T\" /dev/stdin > \"$T/tty-{n}\"; {inner}; read -t {read_secs} -r line; printf '%s' \"$line\" > \"$T/hostread-{n}\"; eval \"$line\""
    );
    let cmdline = format!("bash -c '{}'", body.replace('\'', r"'\''"));
    let screen_f = File::create(&screen).unwrap();
    let mut child = Child(
        Command::new("script")
            .args(["-qec", &cmdline, "/dev/null"])
            .env("W", WARREN)
            .env("CODE", TERM_REPORT)
            .env("MARK", &mark)
            .env("OUT", &out)
            .env("T", t)
            .env("WARREN_ROOT", env.root())
            .env("WARREN_RUN_DIR", env.root().join("run"))
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .env_remove("WARREN_CGROUP")
            .env_remove("WARREN_STORAGE")
            .stdin(Stdio::piped())
            .stdout(screen_f.try_clone().unwrap())
            .stderr(screen_f)
            .spawn()
            .unwrap(),
    );
    // script's stdin stays open (no data) until it is done: at EOF it would send the
    // terminal's EOF character, which the shell's `read` would take instead.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "script run {n} did not finish in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    TermRun {
        screen: read(&screen),
        host_read: read(&hostread),
        marker_ran: mark.exists(),
        caller_tty: {
            let text = read(&ttyf);
            let w: Vec<&str> = text.split_whitespace().collect();
            let hex = |i: usize| w.get(i).and_then(|v| u32::from_str_radix(v, 16).ok());
            match (w.get(1).and_then(|v| v.parse::<u64>().ok()), hex(2), hex(3)) {
                (Some(dev), Some(ma), Some(mi)) => Some((dev, libc::makedev(ma, mi))),
                _ => None,
            }
        },
        out: read(&out),
    }
}

/// The (filesystem, device) pair of a terminal: pty numbers repeat across devpts
/// instances, so the device number alone does not tell the caller's from the zone's.
fn tty_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    (m.rdev() != 0).then_some((m.dev(), m.rdev()))
}

fn sti_all_failed(report: &str) -> bool {
    ["sti0", "sti1", "sti2"]
        .iter()
        .all(|k| field(report, k).is_some_and(|v| v.starts_with("errno")))
}

fn pipes(report: &str) -> bool {
    ["fd0", "fd1", "fd2"]
        .iter()
        .all(|k| field(report, k).is_some_and(|v| v.starts_with("pipe:")))
}

/// Rows for a zone's pipe mode (stdin a terminal, stdout a file) and pty mode.
fn terminal_rows(t: &mut Table, env: &Env, dir: &Path, zone: &str, mode: &str, n0: usize) {
    // stdin a terminal, stdout redirected to a file: three pipes.
    let r = under_terminal(
        env,
        dir,
        n0,
        &format!("\"$W\" login {zone} -- python3 -c \"$CODE\" \"$MARK\" > \"$OUT\""),
        1,
    );
    let rep = r.out.clone();
    t.row(
        format!("{mode}: login with stdin a tty, stdout a file: fds 0-2"),
        "three pipes",
        pipes(&rep),
        &rep,
    );
    t.row(
        format!("{mode}: same: `tty`, open /dev/tty"),
        "not a tty; ENXIO",
        field(&rep, "tty") == Some("not_a_tty") && field(&rep, "devtty") == Some("errno6"),
        format!(
            "tty={:?} devtty={:?}",
            field(&rep, "tty"),
            field(&rep, "devtty")
        ),
    );
    t.row(
        format!("{mode}: same: TIOCSTI 'touch' on 0/1/2 into the caller's shell"),
        "ENOTTY each; the host shell reads nothing",
        sti_all_failed(&rep) && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "sti0={:?} sti1={:?} sti2={:?} host read {:?} ran={}",
            field(&rep, "sti0"),
            field(&rep, "sti1"),
            field(&rep, "sti2"),
            r.host_read,
            r.marker_ran
        ),
    );
    t.row(
        format!("{mode}: same: the command's session and controlling tty"),
        "leads a new session, tty_nr 0",
        field(&rep, "leader") == Some("yes") && field(&rep, "ttynr") == Some("0"),
        format!(
            "leader={:?} ttynr={:?}",
            field(&rep, "leader"),
            field(&rep, "ttynr")
        ),
    );

    // Both stdin and stdout terminals: a pty of the zone's own devpts.
    let r = under_terminal(
        env,
        dir,
        n0 + 1,
        &format!("\"$W\" login {zone} -- python3 -c \"$CODE\" \"$MARK\""),
        1,
    );
    let rep = r.screen.clone();
    let zone_pty =
        field(&rep, "fd0dev").is_some() && field(&rep, "fd0dev") == field(&rep, "ptsdev");
    let caller_dev = r.caller_tty.map(|(dev, _)| dev.to_string());
    t.row(
        format!("{mode}: login with both stdin and stdout ttys: the command's tty"),
        "a pty of the zone's devpts, not the caller's",
        zone_pty && caller_dev.is_some() && field(&rep, "fd0dev") != caller_dev.as_deref(),
        format!(
            "fd0={:?} on devpts {:?}, the zone's devpts {:?}; caller {:?} on {:?}",
            field(&rep, "fd0"),
            field(&rep, "fd0dev"),
            field(&rep, "ptsdev"),
            r.caller_tty,
            caller_dev
        ),
    );
    t.row(
        format!("{mode}: same: TIOCSTI 'touch' into its own pty"),
        "never reaches the caller's shell",
        r.host_read.is_empty() && !r.marker_ran && rep.contains("sti0="),
        format!(
            "sti0={:?} host read {:?} ran={}",
            field(&rep, "sti0"),
            r.host_read,
            r.marker_ran
        ),
    );
    t.row(
        format!("{mode}: same: the command's session"),
        "leads a new session on the zone pty",
        field(&rep, "leader") == Some("yes") && field(&rep, "ttynr").is_some_and(|v| v != "0"),
        format!(
            "leader={:?} ttynr={:?}",
            field(&rep, "leader"),
            field(&rep, "ttynr")
        ),
    );
}

#[test]
fn class2_caller_terminal() {
    require_root();
    require_tool("script", "util-linux: it gives login a real terminal");
    require_tool("bash", "the admin's shell in the terminal runs");
    let env = Env::new();
    let dir = scratch("warren-caller-tty-");
    let mut t = Table::new("2 terminal");

    // Control: without warren, TIOCSTI from the terminal's session reaches the shell,
    // which runs the injected line. If this fails the rows below prove nothing.
    let r = under_terminal(
        &env,
        dir.path(),
        0,
        "python3 -c \"$CODE\" \"$MARK\" > \"$OUT\"",
        1,
    );
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .unwrap_or_else(|_| "absent".into());
    assert!(
        r.marker_ran && !r.host_read.is_empty(),
        "control: a host process's TIOCSTI did not reach the shell under `script` (legacy_tiocsti {}): {} / {} / {}",
        legacy.trim(),
        r.out,
        r.host_read,
        r.screen
    );

    env.host_zone("tz", &[]);
    env.host_zone("tzn", &["userns=false"]);
    env.ok(&["boot", "tz"]);
    env.ok(&["boot", "tzn"]);
    terminal_rows(&mut t, &env, dir.path(), "tz", "default zone", 1);
    terminal_rows(&mut t, &env, dir.path(), "tzn", "userns=false zone", 3);

    // stdout a terminal, stdin not (a file): still pipes, nothing to inject into.
    let r = under_terminal(
        &env,
        dir.path(),
        5,
        "\"$W\" login tz -- python3 -c \"$CODE\" \"$MARK\" < /dev/null",
        1,
    );
    t.row(
        "login with stdout a tty, stdin /dev/null: fds 0-2 and TIOCSTI",
        "three pipes; ENOTTY; the host shell reads nothing",
        pipes(&r.screen) && sti_all_failed(&r.screen) && r.host_read.is_empty() && !r.marker_ran,
        &r.screen,
    );

    // Processes left behind after login returns (pipe mode).
    let r = under_terminal(
        &env,
        dir.path(),
        6,
        "\"$W\" login tz -- sh -c \"setsid sleep 1003 <&0 & nohup sleep 1004 <&0 & echo started\" > \"$OUT\"",
        1,
    );
    let caller = r.caller_tty;
    assert!(
        caller.is_some(),
        "the caller's terminal {:?} is not visible",
        r.caller_tty
    );
    for tag in ["sleep 1003", "sleep 1004"] {
        let pid = find_in_zone(&env, "tz", tag);
        let (holds, tty_nr, fds) = match pid {
            Some(p) => {
                let fds = host_fds(p);
                let holds =
                    (0..3).any(|n| tty_id(Path::new(&format!("/proc/{p}/fd/{n}"))) == caller);
                (holds, stat_field(p, 7), fds)
            }
            None => (true, None, Vec::new()),
        };
        t.row(
            format!("a process left behind by login ({tag} &), from the host"),
            "holds no terminal of the caller's; tty_nr 0",
            pid.is_some() && !holds && tty_nr == Some(0),
            format!("pid {pid:?} tty_nr {tty_nr:?} fds {fds:?}"),
        );
    }

    // A process left behind that injects later, after login returned (pipe mode).
    let r = under_terminal(
        &env,
        dir.path(),
        7,
        "\"$W\" login tz -- sh -c \"python3 -c \\\"\\$0\\\" \\\"\\$1\\\" 1 /tmp/late-7 <&0 & echo started\" \"$CODE\" \"$MARK\" > \"$OUT\"; sleep 2",
        1,
    );
    let late = env.run(&["login", "tz", "--", "cat", "/tmp/late-7"]);
    t.row(
        "a process left behind (pipes) injects 'touch' 1 s after login returned",
        "ENOTTY; the host shell reads nothing",
        sti_all_failed(&late.stdout) && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "{} host read {:?} ran={}",
            late.stdout, r.host_read, r.marker_ran
        ),
    );

    // Same in pty mode: the zone's pty is hung up once login is gone.
    let r = under_terminal(
        &env,
        dir.path(),
        8,
        "\"$W\" login tz -- sh -c \"trap '' HUP; python3 -c \\\"\\$0\\\" \\\"\\$1\\\" 1 /tmp/late-8 <&0 & echo started\" \"$CODE\" \"$MARK\"; sleep 2",
        1,
    );
    let late = env.run(&["login", "tz", "--", "cat", "/tmp/late-8"]);
    t.row(
        "a process left behind on the zone pty injects 'touch' 1 s after login returned",
        "fails or lands in the dead zone pty; the host shell reads nothing",
        late.code == 0 && late.stdout.contains("sti0=") && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "{} host read {:?} ran={}",
            late.stdout, r.host_read, r.marker_ran
        ),
    );

    // stdin and stdout host files, no terminal at all.
    let hin = dir.path().join("host-in");
    let hout = dir.path().join("host-out");
    std::fs::write(&hin, "host input\n").unwrap();
    let before = std::fs::read(&hin).unwrap();
    let code = r#"
import os
r = []
for fd in (0, 1, 2):
    r.append("fd%d=%s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
try:
    f = os.open("/proc/self/fd/0", os.O_WRONLY)
    os.write(f, b"ZONE-WROTE-THIS\n")
    os.close(f)
    r.append("reopen0=wrote-to-" + os.readlink("/proc/self/fd/0"))
except OSError as e:
    r.append("reopen0=errno%d" % e.errno)
print(" ".join(r))
"#;
    let o = env
        .cmd()
        .args(["login", "tz", "--", "python3", "-c", code])
        .stdin(File::open(&hin).unwrap())
        .stdout(File::create(&hout).unwrap())
        .output()
        .unwrap();
    let rep = std::fs::read_to_string(&hout).unwrap_or_default();
    let after = std::fs::read(&hin).unwrap();
    t.row(
        "login with stdin and stdout host files: fds, reopen /proc/self/fd/0 for writing",
        "pipes; the host input file is unchanged",
        o.status.success() && pipes(&rep) && after == before,
        format!(
            "{rep} host-in changed: {} {}",
            after != before,
            String::from_utf8_lossy(&o.stderr)
        ),
    );
    // Kill what was left behind through the zone.
    env.ok(&["halt", "tz", "tzn", "--timeout", "1"]);
    t.finish();
}
