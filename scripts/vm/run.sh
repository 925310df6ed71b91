#!/usr/bin/env bash
# By hand: fetch a kernel, build the initramfs from a release build, boot, print the
# guest's console (its WARREN-VM-RESULT lines). The test suite does the same in
# crates/warren/tests/cgroup_v2_vm.rs.
#
#   scripts/vm/run.sh [debian12|backports] [BIN_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
which=${1:-debian12}
bindir=${2:-$here/../../target/x86_64-unknown-linux-gnu/release}
kdir=$("$here/fetch-kernel.sh" "$which")
initrd=$("$here/build-initramfs.sh" "$kdir" "$bindir" "${WARREN_VM_CACHE:-/var/cache/warren-vm}/initrd-$which.cpio.gz")
exec "$here/boot.sh" "$kdir" "$initrd"
