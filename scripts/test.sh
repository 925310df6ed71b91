#!/usr/bin/env bash
# The whole test suite, as root, on a fresh Debian 12 machine: installs what the tests
# need (Debian's busybox-static for busybox roots, btrfs-progs for the btrfs backend
# test, e2fsprogs for disk.max images and crun for 'warren bench density --compare crun', with apt-get; cargo-fuzz with cargo install), runs every unit and integration
# test, then a bounded fuzzing run (about a minute) of the parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"

if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh: the tests create namespaces, mounts and cgroups; run as root" >&2
    exit 1
fi

need=()
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v crun >/dev/null 2>&1 || need+=(crun)
command -v mkfs.btrfs >/dev/null 2>&1 || need+=(btrfs-progs)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
if [ ${#need[@]} -gt 0 ]; then
    echo "scripts/test.sh: installing ${need[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --lib --bins --tests --no-fail-fast 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '^test result: .* ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
exit "$status"
