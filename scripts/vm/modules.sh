# Sourced by build-initramfs.sh and hostroot.sh: copy kernel modules and their
# dependencies into an initramfs tree.
#
#   vm_modules ROOT MODDIR "name name ..."
#
# Each module of MODDIR/kernel (an unpacked Debian kernel's lib/modules/<version>) with
# its dependencies (the `depends=` of each module's .modinfo: the package ships no
# modules.dep, and kmod need not be installed) lands uncompressed in
# ROOT/lib/modules/<version>/, listed in load order in ROOT/lib/modules/load (busybox
# insmod wants them plain; newer kernels ship them xz-compressed).
vm_modules() {
    local root=$1 moddir=$2 want=$3 kver m
    kver=$(basename "$moddir")
    mkdir -p "$root/lib/modules/$kver"
    : > "$root/lib/modules/load"
    declare -A seen=()
    add_module() {
        local name=$1 path base dst deps d
        path=$(find "$moddir/kernel" \( -name "$name.ko" -o -name "$name.ko.*" -o -name "${name//_/-}.ko" -o -name "${name//_/-}.ko.*" \) | head -1)
        [ -n "$path" ] || { echo "vm_modules: module $name not in $kver (built in?)" >&2; return 0; }
        [ -z "${seen[$name]:-}" ] || return 0
        seen[$name]=1
        base=$(basename "$path"); base=${base%%.ko*}
        dst="$root/lib/modules/$kver/$base.ko"
        case "$path" in
        *.xz) xz -dc "$path" > "$dst" ;;
        *.zst) zstd -dc "$path" > "$dst" ;;
        *.gz) gzip -dc "$path" > "$dst" ;;
        *) cp "$path" "$dst" ;;
        esac
        deps=$(grep -ao 'depends=[a-z0-9_,-]*' "$dst" | head -1 | cut -d= -f2 | tr ',' ' ')
        for d in $deps; do add_module "$d"; done
        echo "$kver/$base.ko" >> "$root/lib/modules/load"
    }
    for m in $want; do add_module "$m"; done
}
