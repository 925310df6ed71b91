#!/usr/bin/env bash
# Fetch one of Debian's cloud kernels into a cache directory, unpacked, never installed.
#
#   scripts/vm/fetch-kernel.sh debian12|backports [CACHE]
#
# debian12  = Debian 12's own kernel (6.1, bookworm / bookworm-security)
# backports = the newer one from bookworm-backports
# Prints the unpacked tree's directory (holding boot/vmlinuz-* and lib/modules/*).
# CACHE defaults to $WARREN_VM_CACHE or /var/cache/warren-vm. Needs `apt-get update`
# done with bookworm-backports in the sources (scripts/test.sh arranges both).
set -euo pipefail
which=${1:?usage: fetch-kernel.sh debian12|backports [CACHE]}
cache=${2:-${WARREN_VM_CACHE:-/var/cache/warren-vm}}
case "$which" in
debian12) release=bookworm ;;
backports) release=bookworm-backports ;;
*) echo "fetch-kernel.sh: unknown kernel '$which' (expected debian12 or backports)" >&2; exit 2 ;;
esac
# The versioned image package the meta package of that release depends on.
if [ "$release" = bookworm ]; then
    # The highest version of the meta package outside backports (bookworm or its security updates).
    meta_version=$(apt-cache madison linux-image-cloud-amd64 | awk -F'|' '$3 !~ /backports/ {gsub(/ /,"",$2); print $2}' | sort -V | tail -1)
else
    meta_version=$(apt-cache madison linux-image-cloud-amd64 | awk -F'|' '$3 ~ /backports/ {gsub(/ /,"",$2); print $2}' | sort -V | tail -1)
fi
if [ -z "$meta_version" ]; then
    echo "fetch-kernel.sh: apt knows no linux-image-cloud-amd64 in $release; add it to the apt sources and run apt-get update (scripts/test.sh does)" >&2
    exit 1
fi
pkg=$(apt-cache depends "linux-image-cloud-amd64=$meta_version" | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
    echo "fetch-kernel.sh: linux-image-cloud-amd64=$meta_version depends on no linux-image-<version> package" >&2
    exit 1
fi
dir="$cache/$pkg"
if [ ! -e "$dir/.done" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    if ! (cd "$tmp" && apt-get -o APT::Sandbox::User=root download "$pkg" >/dev/null); then
        # Stale package lists name a version the mirror no longer has: refresh them
        # once and resolve again.
        rm -rf "$tmp"
        if [ -z "${WARREN_VM_REFRESHED:-}" ]; then
            apt-get update -qq
            WARREN_VM_REFRESHED=1 exec "$0" "$which" "$cache"
        fi
        echo "fetch-kernel.sh: apt-get download $pkg failed" >&2
        exit 1
    fi
    deb=$(ls "$tmp"/*.deb)
    rm -rf "$dir"
    mkdir -p "$tmp/x"
    dpkg -x "$deb" "$tmp/x"
    touch "$tmp/x/.done"
    mv "$tmp/x" "$dir"
fi
echo "$dir"
