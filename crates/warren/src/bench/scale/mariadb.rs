//! The MariaDB workload of `warren bench scale` (`--workload mariadb`): a real MariaDB
//! server per zone (the host's Debian `mariadbd`, seen through the `host` template's
//! read-only /usr) and sysbench's OLTP read/write test as its client in the same zone,
//! over the zone's own Unix socket — the OpenShift + wasp study's contrast to
//! PostgreSQL: InnoDB with `O_DIRECT` (its data files bypass the page cache; in a
//! zone's overlay root its small redo log is still written buffered, MariaDB seeing a
//! 512-byte block size) and a buffer pool of a fixed share of the zone's memory, so the
//! server's memory is bounded.
//!
//! Every program runs with `--no-defaults`: the zone's private /etc may hold a copy of
//! the host's `/etc/mysql`, and what the bench measures must not depend on it. The
//! server runs as the zone's root (`--user=root`; MariaDB, unlike PostgreSQL, allows it
//! when asked), with its data in the zone's private layer (`/var/lib/mysql`), its socket
//! and pid file in the zone's /tmp, and no TCP (`--skip-networking`). The scripts are
//! plain data ([`setup_script`], [`run_script`], [`stop_script`]); the output parser
//! ([`parse`]) is pure and unit-tested.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The programs the workload runs, found under the host root.
#[derive(Debug, Clone)]
pub struct Bins {
    pub server: PathBuf,
    pub install_db: PathBuf,
    pub admin: PathBuf,
    pub client: PathBuf,
    pub sysbench: PathBuf,
}

/// sysbench's tables (`--tables`); `--sysbench-rows` rows each.
pub const TABLES: u32 = 4;
const SOCKET: &str = "/tmp/mysqld.sock";
const DATA: &str = "/var/lib/mysql";

/// The host's MariaDB server and sysbench, or how to install them.
pub fn find_bins(host_root: &Path) -> Result<Bins> {
    let first = |names: &[&str]| {
        names
            .iter()
            .map(|n| host_root.join(n))
            .find(|p| p.is_file())
    };
    let missing = |what: &str| {
        Error::Unsupported(format!(
            "--workload mariadb: {what} is not installed; the bench installs nothing: apt-get install mariadb-server sysbench (Debian 12: MariaDB 10.11, sysbench 1.0.20; the package's own server need not run)"
        ))
    };
    let bins = Bins {
        server: first(&["usr/sbin/mariadbd", "usr/sbin/mysqld"])
            .ok_or_else(|| missing("the MariaDB server (/usr/sbin/mariadbd)"))?,
        install_db: first(&["usr/bin/mariadb-install-db", "usr/bin/mysql_install_db"])
            .ok_or_else(|| missing("mariadb-install-db"))?,
        admin: first(&["usr/bin/mariadb-admin", "usr/bin/mysqladmin"])
            .ok_or_else(|| missing("mariadb-admin"))?,
        client: first(&["usr/bin/mariadb", "usr/bin/mysql"])
            .ok_or_else(|| missing("the mariadb client"))?,
        sysbench: first(&["usr/bin/sysbench"]).ok_or_else(|| missing("sysbench"))?,
    };
    if !host_root
        .join("usr/share/sysbench/oltp_read_write.lua")
        .is_file()
    {
        return Err(missing("sysbench's OLTP scripts (/usr/share/sysbench)"));
    }
    // The paths as the zone sees them: the host's /usr through the sparse root.
    let inside = |p: PathBuf| Path::new("/").join(p.strip_prefix(host_root).unwrap_or(&p));
    Ok(Bins {
        server: inside(bins.server),
        install_db: inside(bins.install_db),
        admin: inside(bins.admin),
        client: inside(bins.client),
        sysbench: inside(bins.sysbench),
    })
}

/// innodb_buffer_pool_size for a zone capped at `memory_per_zone`: `pct` % of it
/// (the study: half), at least 8 MiB.
pub fn buffer_pool_mib(memory_per_zone: u64, pct: u32) -> u64 {
    ((memory_per_zone >> 20) * u64::from(pct) / 100).max(8)
}

/// The server's options (after `--no-defaults`, which must come first).
fn server_options(memory_per_zone: u64, pct: u32, clients: usize) -> String {
    format!(
        "--user=root --datadir={DATA} --socket={SOCKET} --pid-file=/tmp/mysqld.pid --skip-networking \
--log-error={DATA}/error.log --innodb-flush-method=O_DIRECT --innodb-buffer-pool-size={bp}M \
--innodb-log-file-size=32M --performance-schema=OFF --aria-pagecache-buffer-size=8M \
--key-buffer-size=8M --max-connections={maxc}",
        bp = buffer_pool_mib(memory_per_zone, pct),
        maxc = clients + 10,
    )
}

fn sysbench_common(b: &Bins, rows: u32) -> String {
    format!(
        "{} oltp_read_write --db-driver=mysql --mysql-socket={SOCKET} --mysql-user=root --tables={TABLES} --table-size={rows}",
        b.sysbench.display()
    )
}

/// Run as root inside a fresh zone: make the data directory, start the server, wait
/// for it (at most 120 s), create sysbench's tables of `rows` rows each.
pub fn setup_script(b: &Bins, memory_per_zone: u64, pct: u32, clients: usize, rows: u32) -> String {
    format!(
        r#"set -e
mkdir -p {DATA}
{install} --no-defaults --datadir={DATA} --user=root --auth-root-authentication-method=socket --skip-test-db --innodb-log-file-size=32M >/tmp/install-db.log 2>&1 || {{ tail -5 /tmp/install-db.log; exit 1; }}
nohup {server} --no-defaults {opts} </dev/null >/dev/null 2>&1 &
i=0
until {admin} --no-defaults -S {SOCKET} ping >/dev/null 2>&1; do
  i=$((i+1)); [ $i -lt 600 ] || {{ echo 'mariadbd did not answer in 120 s:'; tail -20 {DATA}/error.log; exit 1; }}
  sleep 0.2
done
{client} --no-defaults -S {SOCKET} -u root -e 'CREATE DATABASE IF NOT EXISTS sbtest'
{common} prepare >/tmp/sysbench-prepare.log 2>&1 || {{ tail -5 /tmp/sysbench-prepare.log; exit 1; }}
"#,
        install = b.install_db.display(),
        server = b.server.display(),
        opts = server_options(memory_per_zone, pct, clients),
        admin = b.admin.display(),
        client = b.client.display(),
        common = sysbench_common(b, rows),
    )
}

/// The timed run: a warm-up of `warmup` seconds (its output dropped), then
/// `clients` threads for `secs` seconds, whose summary is the result.
pub fn run_script(b: &Bins, rows: u32, clients: usize, warmup: u64, secs: u64) -> String {
    let common = sysbench_common(b, rows);
    let warm = if warmup > 0 {
        format!("{common} --threads={clients} --time={warmup} run >/tmp/sysbench-warmup.log 2>&1 || true\n")
    } else {
        String::new()
    };
    format!("{warm}exec {common} --threads={clients} --time={secs} run\n")
}

/// Stop the server (a clean shutdown; halt would kill it anyway).
pub fn stop_script(b: &Bins) -> String {
    format!(
        "exec {} --no-defaults -S {SOCKET} shutdown\n",
        b.admin.display()
    )
}

/// What one sysbench run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// "transactions: N (T per sec.)".
    pub tps: f64,
    pub transactions: u64,
    /// "Latency (ms): avg:".
    pub latency_ms: f64,
    /// "95th percentile:".
    pub latency_p95_ms: f64,
    /// "ignored errors:" (deadlocks and the like, retried by sysbench).
    pub errors: u64,
}

/// Parse sysbench 1.0's summary of `oltp_read_write ... run`.
pub fn parse(out: &str) -> Option<Outcome> {
    let field = |prefix: &str| -> Option<&str> {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(str::trim)
    };
    let first_num = |s: &str| -> Option<f64> { s.split_whitespace().next()?.parse().ok() };
    let tx = field("transactions:")?;
    let tps = tx
        .split_once('(')?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Outcome {
        tps,
        transactions: first_num(tx)? as u64,
        latency_ms: first_num(field("avg:")?)?,
        latency_p95_ms: first_num(field("95th percentile:")?)?,
        errors: field("ignored errors:").and_then(first_num).unwrap_or(0.0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sysbench 1.0.20's output against MariaDB 10.11 on this VM.
    const OUT: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 2
Initializing random number generator from current time


Initializing worker threads...

Threads started!

SQL statistics:
    queries performed:
        read:                            78176
        write:                           22336
        other:                           11168
        total:                           111680
    transactions:                        5584   (1116.25 per sec.)
    queries:                             111680 (22325.04 per sec.)
    ignored errors:                      0      (0.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          5.0014s
    total number of events:              5584

Latency (ms):
         min:                                    0.62
         avg:                                    1.79
         max:                                   16.77
         95th percentile:                        2.52
         sum:                                 9993.67

Threads fairness:
    events (avg/stddev):           2792.0000/68.00
    execution time (avg/stddev):   4.9968/0.00
";

    #[test]
    fn parses_sysbench_summary() {
        assert_eq!(
            parse(OUT).unwrap(),
            Outcome {
                tps: 1116.25,
                transactions: 5584,
                latency_ms: 1.79,
                latency_p95_ms: 2.52,
                errors: 0
            }
        );
        assert!(parse("FATAL: unable to connect to MySQL server on socket").is_none());
    }

    #[test]
    fn buffer_pool_is_the_given_share_of_the_cap() {
        assert_eq!(buffer_pool_mib(200 << 20, 50), 100);
        assert_eq!(buffer_pool_mib(16 << 20, 25), 8);
    }

    #[test]
    fn scripts_use_no_host_config_and_the_zone_socket() {
        let b = find_bins_fixture();
        let s = setup_script(&b, 200 << 20, 50, 2, 1000);
        assert!(s.contains("--innodb-flush-method=O_DIRECT"), "{s}");
        assert!(s.contains("--innodb-buffer-pool-size=100M"), "{s}");
        assert!(s.contains("--skip-networking"), "{s}");
        for l in s.lines().filter(|l| l.contains("/usr/")) {
            assert!(
                l.contains("--no-defaults") || l.contains("sysbench"),
                "every MariaDB program reads no config file: {l}"
            );
        }
        let r = run_script(&b, 1000, 2, 10, 30);
        assert!(r.contains("--time=10 run >/tmp/sysbench-warmup.log"), "{r}");
        assert!(r.contains("exec /usr/bin/sysbench") && r.ends_with("--threads=2 --time=30 run\n"));
        assert!(!run_script(&b, 1000, 2, 0, 30).contains("warmup"));
        assert!(stop_script(&b).contains("--no-defaults -S /tmp/mysqld.sock shutdown"));
    }

    fn find_bins_fixture() -> Bins {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "usr/sbin/mariadbd",
            "usr/bin/mariadb-install-db",
            "usr/bin/mariadb-admin",
            "usr/bin/mariadb",
            "usr/bin/sysbench",
            "usr/share/sysbench/oltp_read_write.lua",
        ] {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, "").unwrap();
        }
        let b = find_bins(d.path()).unwrap();
        assert_eq!(b.server, Path::new("/usr/sbin/mariadbd"));
        std::fs::remove_file(d.path().join("usr/bin/sysbench")).unwrap();
        let e = find_bins(d.path()).unwrap_err().to_string();
        assert!(e.contains("apt-get install mariadb-server sysbench"), "{e}");
        b
    }
}
