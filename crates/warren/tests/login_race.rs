//! A login racing a halt (issue 22, item 9): the login has joined the zone when its
//! init exits; it must say so and how to recover, not the kernel's raw ENOMEM from
//! forking into a dead pid namespace. The window is held open with a pause point.

mod common;

use std::process::Stdio;

use common::{alive, resume, wait_stopped, ChildGuard, Env};

#[test]
fn login_racing_a_halt_says_init_exited_not_cannot_allocate_memory() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let init = env.init_pid("z");
    let login = ChildGuard(
        env.cmd()
            .args(["login", "z", "--", "/bin/true"])
            .env(warren::fault::PAUSE_ENV, "login.before-spawn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = login.0.id();
    wait_stopped(pid);
    // What halt does first: the zone's init exits, and the kernel tears down its pid
    // namespace. The stopped login has joined it but forks only when resumed.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &init.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {init}");
    let t = std::time::Instant::now();
    while alive(init) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "the zone's init {init} did not exit"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    resume(pid);
    let mut login = login;
    let out = std::mem::replace(
        &mut login.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Cannot allocate memory"),
        "the kernel's raw error reached the user: {stderr}"
    );
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("zone 'z'")
            && stderr.contains("its init has exited")
            && stderr.contains("boot it again"),
        "{stderr}"
    );
    // And the remedy works.
    env.ok(&["boot", "z"]);
    env.ok(&["halt", "z"]);
}

#[test]
fn login_that_opened_the_zone_before_a_whole_halt_says_init_exited() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let login = ChildGuard(
        env.cmd()
            .args(["login", "z", "--", "/bin/true"])
            .env(warren::fault::PAUSE_ENV, "login.before-join")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = login.0.id();
    wait_stopped(pid);
    // The whole halt runs while the login holds the zone's namespaces open: init
    // exits, the cgroups are removed.
    env.ok(&["halt", "z"]);
    resume(pid);
    let mut login = login;
    let out = std::mem::replace(
        &mut login.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("zone 'z'")
            && stderr.contains("its init has exited")
            && stderr.contains("boot it again"),
        "{stderr}"
    );
}
