//! The pgbench workload of `warren bench scale`: a real PostgreSQL server per zone
//! (the host's Debian binaries, seen through the `host` template's read-only /usr) and a
//! pgbench client in the same zone, talking over the zone's own Unix socket.
//!
//! PostgreSQL refuses to run as root, and the `host` template's /etc/passwd has only
//! root and nobody, so the setup script adds a `postgres` user (uid and gid 70) to the
//! zone's private /etc, owns the data directory (`/var/lib/postgresql/data`, in the
//! zone's private layer) and runs every PostgreSQL program through util-linux's
//! `setpriv` as that user. The scripts are plain data ([`setup_script`], [`run_script`],
//! [`stop_script`]); the output parser ([`parse`]) is pure and unit-tested.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The PostgreSQL user inside each zone.
pub const UID: u32 = 70;

/// The directory of the newest PostgreSQL under `<host_root>/usr/lib/postgresql/*/bin`
/// that has every program the bench runs, or how to install it.
pub fn find_bin(host_root: &Path) -> Result<PathBuf> {
    let base = host_root.join("usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(&base)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    ["postgres", "initdb", "pg_ctl", "pgbench"]
                        .iter()
                        .all(|p| bin.join(p).is_file())
                        .then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    let (_, bin) = versions.pop().ok_or_else(|| {
        Error::Unsupported(format!(
            "--workload pgbench: no PostgreSQL server with pgbench under {}; the bench installs nothing: apt-get install postgresql (Debian 12 ships pgbench in postgresql-15)",
            base.display()
        ))
    })?;
    if !host_root.join("usr/bin/setpriv").is_file() {
        return Err(Error::Unsupported(
            "--workload pgbench: /usr/bin/setpriv is missing (it runs PostgreSQL as a non-root user inside the zone): apt-get install util-linux".into(),
        ));
    }
    Ok(bin)
}

/// shared_buffers for a zone capped at `memory_per_zone`: `pct` % of it (by default a
/// quarter, PostgreSQL's usual advice for a dedicated machine; the OpenShift + wasp
/// study: half), between 16 and 1024 MiB.
pub fn shared_buffers_mib(memory_per_zone: u64, pct: u32) -> u64 {
    ((memory_per_zone >> 20) * u64::from(pct) / 100).clamp(16, 1024)
}

/// Run as root inside a fresh zone: add the user, initdb, start the server (shared_buffers
/// `pct` % of the zone's cap), load the pgbench tables at `scale`.
pub fn setup_script(
    bin: &Path,
    memory_per_zone: u64,
    pct: u32,
    clients: usize,
    scale: u32,
) -> String {
    format!(
        r#"set -e
B={bin}
grep -q '^postgres:' /etc/passwd || echo 'postgres:x:{UID}:{UID}:PostgreSQL:/var/lib/postgresql:/bin/sh' >> /etc/passwd
grep -q '^postgres:' /etc/group || echo 'postgres:x:{UID}:' >> /etc/group
mkdir -p /var/lib/postgresql
chown {UID}:{UID} /var/lib/postgresql
cd /var/lib/postgresql
as() {{ setpriv --reuid={UID} --regid={UID} --clear-groups "$@"; }}
as $B/initdb -D data -U postgres --auth=trust -E UTF8 >/dev/null
as $B/pg_ctl -D data -l data/server.log -w -t 120 -o "-k /tmp -c listen_addresses= -c shared_buffers={sb}MB -c max_connections={maxc}" start >/dev/null
as $B/pgbench -h /tmp -U postgres -i -q -s {scale} postgres
"#,
        bin = bin.display(),
        sb = shared_buffers_mib(memory_per_zone, pct),
        maxc = clients + 10,
    )
}

/// The timed run: a warm-up of `warmup` seconds (its output dropped), then `clients`
/// connections on `threads` threads for `secs` seconds, whose summary is the result.
pub fn run_script(bin: &Path, clients: usize, threads: usize, warmup: u64, secs: u64) -> String {
    let pgbench = |t: u64| {
        format!(
            "setpriv --reuid={UID} --regid={UID} --clear-groups {}/pgbench -h /tmp -U postgres -n -T {t} -c {clients} -j {threads} postgres",
            bin.display()
        )
    };
    let warm = if warmup > 0 {
        format!(
            "{} >/tmp/pgbench-warmup.log 2>&1 || true\n",
            pgbench(warmup)
        )
    } else {
        String::new()
    };
    format!("{warm}exec {}\n", pgbench(secs))
}

/// Stop the server (fast: roll back open transactions, checkpoint, exit).
pub fn stop_script(bin: &Path) -> String {
    format!(
        "cd /var/lib/postgresql && exec setpriv --reuid={UID} --regid={UID} --clear-groups {}/pg_ctl -D data -m fast -w stop\n",
        bin.display()
    )
}

/// What one pgbench run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// "tps = … (without initial connection time)".
    pub tps: f64,
    /// "latency average = … ms".
    pub latency_ms: f64,
    pub transactions: u64,
    pub failed: u64,
}

/// Parse pgbench's summary (PostgreSQL 14 and later print the lines below).
pub fn parse(out: &str) -> Option<Outcome> {
    let field = |prefix: &str| -> Option<&str> {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(str::trim)
    };
    let first_num = |s: &str| -> Option<f64> { s.split_whitespace().next()?.parse().ok() };
    Some(Outcome {
        tps: first_num(field("tps =")?)?,
        latency_ms: first_num(field("latency average =")?)?,
        transactions: first_num(field("number of transactions actually processed:")?)? as u64,
        failed: field("number of failed transactions:")
            .and_then(first_num)
            .unwrap_or(0.0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pgbench 15.18's output on this VM.
    const OUT: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 2
query mode: simple
number of clients: 2
number of threads: 2
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 3309
number of failed transactions: 0 (0.000%)
latency average = 3.022 ms
initial connection time = 6.602 ms
tps = 661.838651 (without initial connection time)
";

    #[test]
    fn parses_pgbench_summary() {
        let o = parse(OUT).unwrap();
        assert_eq!(
            o,
            Outcome {
                tps: 661.838651,
                latency_ms: 3.022,
                transactions: 3309,
                failed: 0
            }
        );
        assert!(parse("pgbench: error: connection to server failed").is_none());
    }

    #[test]
    fn buffers_follow_the_zone_cap() {
        assert_eq!(shared_buffers_mib(512 << 20, 25), 128);
        assert_eq!(shared_buffers_mib(512 << 20, 50), 256);
        assert_eq!(shared_buffers_mib(32 << 20, 25), 16);
        assert_eq!(shared_buffers_mib(64 << 30, 25), 1024);
    }

    #[test]
    fn scripts_run_postgres_as_its_user() {
        let bin = Path::new("/usr/lib/postgresql/15/bin");
        let s = setup_script(bin, 512 << 20, 25, 4, 2);
        assert!(s.contains("shared_buffers=128MB") && s.contains("max_connections=14"));
        assert!(s.contains("-i -q -s 2"));
        for s in [s, run_script(bin, 4, 2, 3, 5), stop_script(bin)] {
            for l in s
                .lines()
                .filter(|l| l.contains("$B/") || l.contains("bin/p"))
            {
                assert!(l.contains("setpriv") || l.starts_with("as "), "{l}");
            }
        }
        let r = run_script(bin, 4, 2, 3, 5);
        assert!(
            r.contains("-T 3 -c 4 -j 2 postgres >/tmp/pgbench-warmup.log"),
            "{r}"
        );
        assert!(
            r.contains("exec setpriv") && r.ends_with("-T 5 -c 4 -j 2 postgres\n"),
            "{r}"
        );
        assert!(!run_script(bin, 4, 2, 0, 5).contains("warmup"));
    }
}
