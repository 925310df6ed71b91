#!/usr/bin/env bash
# The whole test suite, as root, on a fresh Debian 12 machine: installs what the tests
# need (Debian's busybox-static for busybox roots, btrfs-progs for the btrfs backend
# test, e2fsprogs for disk.max images, python3 for the bridge-filter escape test, python3-prometheus-client for the metrics test, crun and lxc for 'warren bench density --compare crun,lxc', postgresql for
# 'warren bench scale --workload pgbench' (Debian 12 ships pgbench in postgresql-15),
# mariadb-server and sysbench for '--workload mariadb' (host service never started),
# podman and containerd for the OCI runtime tests, containernetworking-plugins for the CRI
# test, with apt-get; cargo-fuzz with cargo
# install; for tests/cgroup_v2_vm.rs and tests/cri.rs (its VM test): the bookworm-backports apt
# source and QEMU from it, see below, and virtiofsd with cargo install; socat and schemathesis, in a venv with pip, for the daemon's tests; the CRI
# client (container-runtime-interface-api, grpcio, websocket-client) in a venv with pip;
# chromium, nodejs and npm with apt-get and the dashboard's packages with npm ci), runs the lints (cargo fmt --check, clippy -D warnings), a bounded fuzzing
# run (about a minute) of the parsers, then every unit
# and integration test.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"

if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh: the tests create namespaces, mounts and cgroups; run as root" >&2
    exit 1
fi

need=()
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
# tests/daemon*.rs drive the daemon with curl --unix-socket.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v crun >/dev/null 2>&1 || need+=(crun)
command -v mkfs.btrfs >/dev/null 2>&1 || need+=(btrfs-progs)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
# tests/oci_image.rs compresses an image layer with zstd.
command -v zstd >/dev/null 2>&1 || need+=(zstd)
# The zstd crate (warren export/import) builds its bundled libzstd with the C compiler.
command -v cc >/dev/null 2>&1 || need+=(gcc)
# tests/dashboard.rs drives the daemon's web dashboard in headless Chromium
# (playwright-core from npm, pinned in crates/warren-daemon/ui/package-lock.json, runs
# on Debian 12's node 18) and rebuilds the page to check the committed build.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# tests/escape_net.rs forges frames inside zones with the host's python3 (the host
# template shares /usr).
[ -x /usr/bin/python3 ] || need+=(python3)
# tests/metrics.rs reads `warren metrics` back with the Prometheus client library's
# parsers (Debian's package, for /usr/bin/python3).
dpkg -s python3-prometheus-client >/dev/null 2>&1 || need+=(python3-prometheus-client)
# tests/bench.rs compares against LXC and runs PostgreSQL + pgbench in zones; their
# recommends (lxcfs, dnsmasq, ...) would start host daemons, so they are left out.
command -v lxc-start >/dev/null 2>&1 || need+=(lxc)
# tests/proc_views.rs starts private lxcfs instances. On a systemd host the package
# also starts lxcfs.service at /var/lib/lxcfs, which every other test's zones (and
# LXC's, through its lxcfs hook) would then bind: it is stopped and disabled below.
new_lxcfs=
command -v lxcfs >/dev/null 2>&1 || { need+=(lxcfs); new_lxcfs=1; }
ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || need+=(postgresql)
# tests/oci.rs and tests/containerd.rs drive warren-oci with real clients (private
# stores, temp roots); podman is installed with its recommends (catatonit,
# fuse-overlayfs, uidmap), as Debian users have it.
with_recommends=()
command -v podman >/dev/null 2>&1 || with_recommends+=(podman)
command -v containerd >/dev/null 2>&1 || with_recommends+=(containerd)
# tests/cri.rs and 'warren bench cri': the CNI bridge, host-local and loopback plugins
# for pods with their own network namespace (used only inside containerd's own).
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ $((${#need[@]} + ${#with_recommends[@]})) -gt 0 ]; then
    echo "scripts/test.sh: installing ${need[*]} ${with_recommends[*]} (apt-get)"
    apt-get update -qq
    export DEBIAN_FRONTEND=noninteractive
    [ ${#need[@]} -eq 0 ] ||
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    [ ${#with_recommends[@]} -eq 0 ] ||
        apt-get install -y -qq "${with_recommends[@]}" >/dev/null
fi
# tests/bench.rs runs Debian's nginx in zones (from the host's /usr, as --server nginx
# does); the package would start a host nginx on port 80, so it is installed with a
# policy-rc.d that forbids starting services (removed right after), and disabled.
if [ ! -x /usr/sbin/nginx ]; then
    echo "scripts/test.sh: installing nginx-light (apt-get; the host service is not started)"
    own_policy=
    [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
    [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
    [ ! -d /run/systemd/system ] || systemctl disable nginx.service >/dev/null 2>&1 || true
fi
# tests/bench_scale_policy.rs runs MariaDB + sysbench in zones ('warren bench scale
# --workload mariadb', the OpenShift + wasp study): the zones run their own mariadbd from
# the host's /usr. The package would start a host server (and on Debian runs
# mariadb-install-db into /var/lib/mysql), so it is installed with a policy-rc.d that
# forbids starting services (removed right after), and disabled.
if [ ! -x /usr/sbin/mariadbd ] || ! command -v sysbench >/dev/null 2>&1; then
    echo "scripts/test.sh: installing mariadb-server and sysbench (apt-get; the host service is not started)"
    own_policy=
    [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mariadb-server sysbench >/dev/null
    [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
    [ ! -d /run/systemd/system ] || systemctl disable mariadb.service >/dev/null 2>&1 || true
fi
if [ -n "$new_lxcfs" ] && [ -d /run/systemd/system ]; then
    systemctl disable --now lxcfs.service >/dev/null 2>&1 || true
fi

# tests/cgroup_v2_vm.rs boots Debian's cloud kernels (fetched by scripts/vm/ with
# apt-get download, unpacked into /var/cache/warren-vm, never installed) under QEMU
# without KVM. qemu-system-x86 comes from bookworm-backports (10.0): on these machines
# a backported qemu-utils 10.0 is installed, and Debian 12's own qemu-system-x86 7.2
# would remove it; the backported one installs beside it (warren itself needs neither).
# The backports source also gives the newer of the two kernels.
if ! apt-cache policy 2>/dev/null | grep -q bookworm-backports; then
    echo "scripts/test.sh: adding the bookworm-backports apt source"
    cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    apt-get update -qq
fi
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    echo "scripts/test.sh: installing qemu-system-x86 from bookworm-backports (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -t bookworm-backports qemu-system-x86 >/dev/null
fi
# tests/cri.rs (cri_on_debian12_cgroup_v2_in_a_fresh_vm) boots Debian 12's kernel with this host's root shared read-only
# through virtiofs (scripts/vm/hostroot.sh): virtiofsd is not in bookworm, so it is
# built with cargo install (pinned), which needs libseccomp and libcap-ng's headers.
if ! command -v virtiofsd >/dev/null 2>&1 && [ ! -x /usr/libexec/virtiofsd ]; then
    echo "scripts/test.sh: installing virtiofsd (apt-get libseccomp-dev libcap-ng-dev; cargo install)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libseccomp-dev libcap-ng-dev pkg-config >/dev/null
    cargo install --locked --quiet virtiofsd@1.14.0
fi
# tests/daemon_load.rs: schemathesis (PyPI) in its own venv, reaching the daemon's
# unix socket through a loopback TCP bridge made by socat.
command -v socat >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends socat >/dev/null
st_venv=/var/cache/warren-test/schemathesis
if [ ! -x "$st_venv/bin/schemathesis" ]; then
    echo "scripts/test.sh: installing schemathesis into $st_venv (pip)"
    dpkg -s python3-venv >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    /usr/bin/python3 -m venv "$st_venv"
    "$st_venv/bin/pip" install -q schemathesis
fi
# tests/cri.rs and 'warren bench cri': the Kubernetes project's CRI stubs
# (container-runtime-interface-api) with grpcio and websocket-client, in their own venv.
cri_venv=/var/cache/warren-test/cri
if ! "$cri_venv/bin/python3" -c 'import cri_api.v1, grpc, websocket' >/dev/null 2>&1; then
    echo "scripts/test.sh: installing the CRI client into $cri_venv (pip)"
    dpkg -s python3-venv >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    /usr/bin/python3 -m venv "$cri_venv"
    "$cri_venv/bin/pip" install -q container-runtime-interface-api websocket-client
fi
command -v xz >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends xz-utils >/dev/null
# The dashboard's npm packages (esbuild, xterm.js, uPlot, playwright-core), as locked.
echo "scripts/test.sh: npm ci in crates/warren-daemon/ui"
(cd crates/warren-daemon/ui && npm ci --no-audit --no-fund --loglevel=error)
# The two kernels, cached (about 50 MiB each, once).
scripts/vm/fetch-kernel.sh debian12 >/dev/null
scripts/vm/fetch-kernel.sh backports >/dev/null

# The lints first: a formatting or clippy finding fails the run before any test.
echo "scripts/test.sh: cargo fmt --all -- --check"
cargo fmt --all -- --check
echo "scripts/test.sh: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"

# tests/shim.rs runs containerd-shim-warren-v1 from the directory of the warren under
# test; `cargo test` builds only the binaries of the package it tests.
echo "scripts/test.sh: cargo build -p containerd-shim-warren"
cargo build -p containerd-shim-warren

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --lib --bins --tests --no-fail-fast 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '^test result: .* ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
# A test binary that crashed or was killed prints no "test result" line: count it
# as a failure so the summary never reads green over a dead binary.
crashed=$(grep -c "process didn't exit successfully: .*(signal:" "$log" || true)
failed=$((failed + crashed))
echo "tests: $passed passed, $failed failed"
exit "$status"
