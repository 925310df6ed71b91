#!/usr/bin/env bash
# The whole test suite, as root, on a fresh Debian 12 machine: installs what the tests
# need from Debian's packages (busybox-static for busybox roots, btrfs-progs for the
# btrfs backend test), then runs every unit and integration test.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"

if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh: the tests create namespaces, mounts and cgroups; run as root" >&2
    exit 1
fi

need=()
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v mkfs.btrfs >/dev/null 2>&1 || need+=(btrfs-progs)
if [ ${#need[@]} -gt 0 ]; then
    echo "scripts/test.sh: installing ${need[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo test --workspace --no-fail-fast
