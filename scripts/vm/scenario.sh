#!/bin/sh
# The scenario: template, create, install, boot, login, OOM, fork bomb, cpu.max, stat,
# memstat, doctor, probe, agent, clone, swap, disk.max, bridge, OCI, halt and gc. Every
# check prints one line
#   WARREN-VM-RESULT <check> ok|fail <detail>
# that the tests assert on; WARREN-VM-LOG lines carry output for a failure's diagnosis.
# Checks go on after a failure.
#
# Two drivers run this same script, so a difference between them is a failing test:
# - the cgroup v2 VM (scripts/vm/guest-stage2.sh, crates/warren/tests/cgroup_v2_vm.rs):
#   warren from a service's cgroup (WARREN_VM_SERVICE), the guest's own state root;
# - this host, whatever its cgroup version (crates/warren/tests/scenario_host.rs): a
#   temporary state root (WARREN_ROOT), names prefixed (WARREN_SCENARIO_PREFIX), and
#   what the host shares given by the test: its own cgroups to search, the group, a
#   bridge, a swap file, a device the zone must not read.
# Checks that exist on one cgroup version only say so in their name (v2-...).
# WARREN_SCENARIO_PATH: the directory of the warren under test, first in PATH.
export PATH=${WARREN_SCENARIO_PATH:+$WARREN_SCENARIO_PATH:}/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
svc=${WARREN_VM_SERVICE:-}
W=warren
P=${WARREN_SCENARIO_PREFIX:-}
ROOT=${WARREN_ROOT:-/var/lib/warren}
TMPD=${WARREN_SCENARIO_TMP:-/tmp}
OCIROOT=${WARREN_OCI_ROOT:-/run/warren-oci}
GROUP=${WARREN_SCENARIO_GROUP:-warren}
# Where this run's cgroups live (the service's cgroup in the VM; the test's own
# cgroup in every hierarchy on the host).
CG_SEARCH=${WARREN_SCENARIO_CGROUPS:-$svc}
if grep -qv '^0::' /proc/self/cgroup; then CGV=v1; else CGV=v2; fi
result() { echo "WARREN-VM-RESULT $1 $2 $(echo "$3" | tr '\n' ' ' | cut -c1-400)"; }
log() { sed 's/^/WARREN-VM-LOG /'; }
# run NAME CMD...: ok when CMD exits 0; its output goes to the log either way.
run() {
    name=$1; shift
    out=$("$@" 2>&1); rc=$?
    echo "$out" | log
    if [ $rc -eq 0 ]; then result "$name" ok "$(echo "$out" | tail -1)"; else result "$name" fail "rc=$rc: $(echo "$out" | tail -3)"; fi
    return $rc
}
# expect NAME ACTUAL WANTED
expect() {
    if [ "$2" = "$3" ]; then result "$1" ok "$2"; else result "$1" fail "got '$2', want '$3'"; fi
}
# v1v2 V1 V2: the value for this cgroup version.
v1v2() { if [ $CGV = v1 ]; then echo "$1"; else echo "$2"; fi; }
# zdir ZONE CONTROLLER: the zone's cgroup directory holding CONTROLLER (its one
# directory on v2), from its runtime record.
zdir() {
    tr -d ' \n' < "$ROOT/zones/$1/runtime.json" 2>/dev/null | grep -o '\["[^"]*","[^"]*"\]' | tr -d '[]"' |
    while read -r line; do
        ctls=${line%,*}
        if [ $CGV = v2 ]; then echo "${line##*,}"; break; fi
        case ",$ctls," in *",$2,"*) echo "${line##*,}"; break ;; esac
    done
}
# cgval ZONE KEY: a limit or counter of the zone, read from the file this cgroup
# version keeps it in (KEY is the v2 file, or oom_kill, pids_events_max, cpu_usage_us).
cgval() {
    if [ $CGV = v2 ]; then
        d=$(zdir "$1" unified)
        case $2 in
        oom_kill) awk '/^oom_kill / {print $2}' $d/memory.events ;;
        pids_events_max) awk '/^max / {print $2}' $d/pids.events ;;
        cpu_usage_us) awk '/^usage_usec/ {print $2}' $d/cpu.stat ;;
        *) cat $d/$2 ;;
        esac
        return
    fi
    m=$(zdir "$1" memory)
    case $2 in
    memory.max) cat $m/memory.limit_in_bytes ;;
    memory.low) cat $m/memory.soft_limit_in_bytes ;;
    memory.swap.max) echo $(( $(cat $m/memory.memsw.limit_in_bytes) - $(cat $m/memory.limit_in_bytes) )) ;;
    oom_kill) awk '/^oom_kill / {print $2}' $m/memory.oom_control ;;
    pids.max|pids.current) cat "$(zdir "$1" pids)/$2" ;;
    pids_events_max) awk '/^max / {print $2}' "$(zdir "$1" pids)/pids.events" ;;
    cpu.max) d=$(zdir "$1" cpu); echo "$(cat $d/cpu.cfs_quota_us) $(cat $d/cpu.cfs_period_us)" ;;
    cpu.weight) cat "$(zdir "$1" cpu)/cpu.shares" ;;
    cpu_usage_us) echo $(( $(cat "$(zdir "$1" cpuacct)/cpuacct.usage") / 1000 )) ;;
    cpuset.cpus.effective) cat "$(zdir "$1" cpuset)/cpuset.effective_cpus" ;;
    esac
}
# has_cpu ZONE: whether the zone joined the cpu controller ("yes"/"no").
has_cpu() {
    if [ $CGV = v2 ]; then
        d=$(zdir "$1" unified)
        if grep -qw cpu $d/cgroup.controllers || [ -e $d/cpu.max ]; then echo yes; else echo no; fi
    elif [ -n "$(zdir "$1" cpu)" ]; then echo yes; else echo no; fi
}
plain=${P}plain uz=${P}uz sw=${P}sw dq=${P}dq nz=${P}nz be=${P}be cl=${P}cl c1=${P}c1 c2=${P}c2

if [ -n "$svc" ]; then
    result setup ok "warren runs in $(cut -d: -f3 /proc/self/cgroup) beside pid $(head -1 $svc/cgroup.procs)"
else
    result setup ok "cgroup $CGV, state root $ROOT, warren runs in $(grep -m1 -e memory -e '^0::' /proc/self/cgroup)"
fi
run info $W info
run doctor $W doctor --zones 10
run template $W template create bb --busybox
case "$($W info 2>&1)" in
*"userns zones:  ok"*) result info-userns ok "$($W info | grep 'userns zones')" ;;
*) result info-userns fail "$($W info 2>&1 | grep -A1 'userns zones')" ;;
esac
# The doctor names the missing feature: a state root on tmpfs has idmapped mounts only
# from Linux 6.3 on.
out=$($W --root $TMPD/tmpfs-root doctor --zones 1 2>&1); rc=$?
echo "$out" | log
kv=$(uname -r | awk -F. '{print $1 * 1000 + $2}')
if [ "$kv" -lt 6003 ]; then
    case "$rc:$out" in
    1:*"idmapped overlay layers"*"will fail"*tmpfs*) result userns-tmpfs-detected ok "$(echo "$out" | grep -m1 'idmapped mount of')" ;;
    *) result userns-tmpfs-detected fail "rc=$rc: $(echo "$out" | grep -m1 idmapped)" ;;
    esac
else
    case "$rc:$out" in
    0:*) result userns-tmpfs-detected ok "Linux $(uname -r) idmaps tmpfs: doctor exit 0" ;;
    *) result userns-tmpfs-detected fail "rc=$rc: $(echo "$out" | grep -m1 idmapped)" ;;
    esac
fi
rm -rf $TMPD/tmpfs-root

# A zone without user namespaces, every cgroup limit it can take.
run create-plain $W create $plain --template bb --set userns=false --set memory.max=32M \
    --set max-processes=20 --set cpu.max=0.5 --set memory.request=8M --set cpu.weight=50 \
    --set caps.add=CAP_MKNOD
run install-plain $W install $plain
if run boot-plain $W boot $plain; then
    result zone-cgroup ok "$(zdir $plain memory)"
    expect memory.max "$(cgval $plain memory.max)" 33554432
    expect memory.low "$(cgval $plain memory.low)" 8388608
    expect pids.max "$(cgval $plain pids.max)" 20
    expect cpu.max "$(cgval $plain cpu.max)" "50000 100000"
    # cpu.weight 50 is cpu.shares 2 + 49 * 262142 / 9999 on v1.
    expect cpu.weight "$(cgval $plain cpu.weight)" "$(v1v2 $((2 + 49 * 262142 / 9999)) 50)"
    run login-plain $W login $plain -- echo hello
    # Device control on v2 (the BPF device filter): the zone, given CAP_MKNOD, may make
    # and use a node of an allowed device, but not make and read one for the VM's disk.
    run devices-allowed $W login $plain -- sh -c 'head -c 4 /dev/urandom >/dev/null && echo urandom ok'
    disk=${WARREN_SCENARIO_DENIED_DEV:-$(cat /sys/block/vda/dev)}
    # The zone's /dev is the shared read-only template and every other filesystem it
    # can write is nodev: a node the zone makes (it has CAP_MKNOD) opens nothing,
    # whatever the device filter says; reading the VM's disk through one fails.
    run mknod-no-usable-node $W login $plain -- sh -c '! mknod /dev/wnull c 1 3 2>/dev/null && mknod /tmp/wnull c 1 3 && ! (echo x > /tmp/wnull) 2>/dev/null && rm /tmp/wnull && echo "no node the zone makes opens: /dev is read-only, the rest nodev"'
    out=$($W login $plain -- sh -c "mknod /tmp/wdisk b ${disk%:*} ${disk#*:} && head -c 512 /tmp/wdisk | wc -c" 2>&1); rc=$?
    echo "$out" | log
    if [ $rc -ne 0 ]; then result devices-disk-denied ok "rc=$rc: $(echo "$out" | tail -1)"; else result devices-disk-denied fail "the zone read the block device $disk: $out"; fi
    # OOM inside the zone only: dd's 64 MiB buffer does not fit in 32 MiB.
    $W login $plain -- dd if=/dev/zero of=/dev/null bs=64M count=1 2>&1 | log
    kills=$(cgval $plain oom_kill)
    if [ "${kills:-0}" -ge 1 ]; then result oom-kill ok "oom_kill $kills"; else result oom-kill fail "oom_kill ${kills:-unreadable}"; fi
    case "$($W list 2>&1)" in
    *"running, oom-killed ("*) result list-oom-killed ok "$($W list | grep $plain)" ;;
    *) result list-oom-killed fail "$($W list 2>&1 | grep $plain)" ;;
    esac
    # The process cap: 40 sleepers asked for, pids.max 20 holds.
    $W login $plain -- sh -c 'for i in $(seq 40); do sleep 3 & done 2>/dev/null; wait' 2>&1 | tail -2 | log
    max=$(cgval $plain pids_events_max)
    if [ "${max:-0}" -ge 1 ]; then result pids-cap ok "pids.events max $max"; else result pids-cap fail "pids.events max ${max:-unreadable}"; fi
    # The sleepers the shell left when its fork failed (busybox sh exits on a failed
    # fork) hold the cap for up to 3 s: wait until only init is left, so the busy loop
    # below can fork its `date`.
    for _ in $(seq 50); do [ "$(cgval $plain pids.current)" -le 1 ] && break; sleep 0.2; done
    # cpu.max 0.5: a busy loop for 3 s gets about 1.5 s of CPU.
    before=$(cgval $plain cpu_usage_us)
    $W login $plain -- sh -c 'end=$(($(date +%s)+3)); while [ $(date +%s) -lt $end ]; do :; done' 2>&1 | log
    after=$(cgval $plain cpu_usage_us)
    used=$(( (after - before) / 1000 ))
    if [ $used -le 2200 ] && [ $used -ge 300 ]; then result cpu-max ok "${used} ms of CPU in 3 s"; else result cpu-max fail "${used} ms of CPU in 3 s under cpu.max 0.5"; fi
    run stat $W stat $plain
    run memstat $W memstat
fi

# The default zone: user namespaces on.
run create-userns $W create $uz --template bb
run install-userns $W install $uz
if run boot-userns $W boot $uz; then
    run login-userns $W login $uz -- id
    # Controllers per zone, for the limits it sets: uz has none that needs cpu (though
    # plain, booted beside it, has cpu.max), so no cpu controller (no cpu.max on v2).
    expect no-cpu-without-cpu-limit "$(has_cpu $uz)" no
    expect cpu-with-cpu-max "$(has_cpu $plain)" yes
    if [ $CGV = v2 ]; then
        expect v2-only-needed-controllers "$(cat $(zdir $uz unified)/cgroup.controllers)" "memory pids"
        expect v2-cpu-zone-controllers "$(cat $(zdir $plain unified)/cgroup.controllers)" "cpu memory pids"
    fi
fi

# A state root other than the default starts its id ranges at a slot hashed from its
# path. Until session 15 those slots ran up to 2^32; this path's (in the VM, where ROOT
# is /var/lib/warren, on the ext4 disk) was at 2,609,119,232, so the zone's tty group,
# base + 5, the gid= of its /dev/pts, was past 2^31 - 1, which the devpts of Linux 6.1
# and 6.12 (Debian 12's kernels) refuses (EINVAL: no zone of that root could boot
# there; 6.18 takes it). Ranges now end below 2^31 (idmap::ALLOC_END).
hr=$ROOT/high-ids-1
hz=${P}hi
run template-high-root $W --root $hr template create bb --busybox
run create-high-root $W --root $hr create $hz --template bb
run install-high-root $W --root $hr install $hz
if run boot-high-root $W --root $hr boot $hz; then
    run login-high-root $W --root $hr login $hz -- sh -c 'test -c /dev/ptmx && test -d /dev/pts && id'
    $W --root $hr halt $hz 2>&1 | log
fi
$W --root $hr delete --force $hz 2>&1 | log
$W --root $hr template delete bb 2>&1 | log
rm -rf $hr

# Live limits: config set on a running zone booted without a CPU limit changes its
# files at once (joining the cpu controller: v1 a cpu cgroup, v2 another bucket).
lv=${P}lv
run create-live $W create $lv --template bb --set memory.max=64M
run install-live $W install $lv
if run boot-live $W boot $lv; then
    if run live-set $W config set $lv memory.max=48M cpu.max=0.25 max-processes=30; then
        expect live-memory.max "$(cgval $lv memory.max)" 50331648
        expect live-cpu.max "$(cgval $lv cpu.max)" "25000 100000"
        expect live-pids.max "$(cgval $lv pids.max)" 30
        run live-login $W login $lv -- true
    fi
    run live-only $W config set $lv --live-only memory.max=40M
    out=$($W list -v 2>&1)
    case "$out" in
    *"in force $(v1v2 memory.limit_in_bytes memory.max)=41943040 (configured 50331648)"*) result live-in-force ok "$(echo "$out" | grep $lv)" ;;
    *) result live-in-force fail "$(echo "$out" | grep $lv)" ;;
    esac
    $W halt $lv 2>&1 | log
fi
$W delete --force $lv 2>&1 | log

# An init that dies at once: boot says so with its status, list shows it.
bad=${P}bad
run create-false $W create $bad --template bb --set init=/bin/false
run install-false $W install $bad
out=$($W boot $bad --watch 5000 2>&1); rc=$?
echo "$out" | log
case "$rc:$out" in
1:*"exited with status 1"*) result init-exit-reported ok "$(echo "$out" | head -1)" ;;
*) result init-exit-reported fail "rc=$rc: $out" ;;
esac
case "$($W list 2>&1)" in
*"installed, exited (status 1)"*) result list-exited ok "$($W list | grep $bad)" ;;
*) result list-exited fail "$($W list 2>&1 | grep $bad)" ;;
esac
$W delete --force $bad 2>&1 | log

# memory.swap -> memory.swap.max (v1: memsw), with warren's own swap (zram in the VM,
# the test's file on the host): 24 MiB in a 16 MiB zone fit only through swap.
if run swap-enable $W swap enable --size 256M ${WARREN_SCENARIO_SWAP:---zram}; then
    run create-swap $W create $sw --template bb --set userns=false --set memory.max=16M --set memory.swap=64M
    run install-swap $W install $sw
    if run boot-swap $W boot $sw; then
        expect memory.swap.max "$(cgval $sw memory.swap.max)" 67108864
        run swap-used $W login $sw -- dd if=/dev/zero of=/dev/null bs=24M count=1
        kills=$(cgval $sw oom_kill)
        expect swap-no-oom "${kills:-0}" 0
        $W halt $sw 2>&1 | log
    fi
fi

# disk.max: the zone's writes go to a capped ext4 image; past the cap, ENOSPC. And a
# cpuset, checked in the v2 file.
run create-disk $W create $dq --template bb --set disk.max=32M --set cpuset=1
run install-disk $W install $dq
if run boot-disk $W boot $dq; then
    expect cpuset.cpus "$(cgval $dq cpuset.cpus.effective)" 1
    out=$($W login $dq -- dd if=/dev/zero of=/big bs=1M count=64 2>&1); rc=$?
    echo "$out" | log
    case "$rc:$out" in
    0:*) result disk-max-enospc fail "64 MiB written under disk.max 32M" ;;
    *"space"*) result disk-max-enospc ok "$(echo "$out" | grep -m1 -i space)" ;;
    *) result disk-max-enospc fail "rc=$rc: $out" ;;
    esac
    $W halt $dq 2>&1 | log
fi

# Bridged networking: eth0 on the bridge (warren0 in the VM), the gateway answers.
run create-bridge $W create $nz --template bb --set net=bridge $WARREN_SCENARIO_BRIDGE_SETS
run install-bridge $W install $nz
if run boot-bridge $W boot $nz; then
    run ping-gateway $W login $nz -- ping -c1 -W5 ${WARREN_SCENARIO_GATEWAY:-10.231.0.1}
    $W halt $nz 2>&1 | log
fi

run agent-once $W agent --once
# A real eviction: thresholds every host crosses (less than 100 % available), no grace;
# the best-effort zone goes first, through a graceful halt, and is shown evicted.
run create-be $W create $be --template bb --set priority=best-effort
run install-be $W install $be
if run boot-be $W boot $be; then
    printf 'interval-ms = 50\nwindow-s = 0.5\nsuspend-first = false\n[available]\ntrigger = 100.0\nclear = 100.0\ngrace-s = 0.0\n' > $TMPD/agent.toml
    run agent-evicts $W agent --once --config $TMPD/agent.toml
    case "$($W list 2>&1)" in
    *$be*evicted*) result evicted-listed ok "$($W list | grep "^$be")" ;;
    *) result evicted-listed fail "$($W list 2>&1 | tr '\n' ';')" ;;
    esac
fi
# A clone of the (now halted) evicted zone, by copy-on-write, boots.
if run clone $W clone $be $cl; then
    run boot-clone $W boot $cl && $W halt $cl 2>&1 | log
fi

# The OCI runtime, from the same cgroup.
mkdir -p $TMPD/bundle/rootfs/bin && cp /bin/busybox $TMPD/bundle/rootfs/bin/busybox
for a in sh true echo; do ln -sf busybox $TMPD/bundle/rootfs/bin/$a; done
if run oci-spec $W oci spec --bundle $TMPD/bundle; then
    sed -i -e 's/"terminal": *true/"terminal": false/' -e 's/"sh"/"sh","-c","echo oci-ok"/' $TMPD/bundle/config.json
    out=$($W oci --root $OCIROOT run --bundle $TMPD/bundle $c1 2>&1)
    echo "$out" | log
    case "$out" in *oci-ok*) result oci-run ok "$(echo "$out" | tail -1)" ;; *) result oci-run fail "$(echo "$out" | tail -2)" ;; esac
    $W oci --root $OCIROOT delete --force $c1 2>&1 | log
    # A relative linux.cgroupsPath lands beneath the runtime's own cgroup, kept as
    # given (runtime spec); pause and resume through the freezer / cgroup.freeze.
    sed -e 's/"sh","-c","echo oci-ok"/"sleep","600"/' -e "s/\"linux\": *{/\"linux\": {\"cgroupsPath\": \"default\\/$c2\",/" \
        $TMPD/bundle/config.json > $TMPD/bundle/config2.json && mv $TMPD/bundle/config2.json $TMPD/bundle/config.json
    ln -sf busybox $TMPD/bundle/rootfs/bin/sleep
    O="$W oci --root $OCIROOT"
    # The created process keeps the runtime's stdio (as with runc): files, not a pipe.
    $O create --bundle $TMPD/bundle $c2 </dev/null >$TMPD/oci-create.log 2>&1; rc=$?
    log < $TMPD/oci-create.log
    if [ $rc -eq 0 ]; then result oci-create ok $c2; else result oci-create fail "rc=$rc: $(tail -2 $TMPD/oci-create.log)"; fi
    if [ $rc -eq 0 ] && run oci-start $O start $c2; then
        # v1: one leaf per hierarchy; the freezer's holds freezer.state.
        frz=$(v1v2 freezer.state cgroup.freeze)
        cg=$(find $CG_SEARCH -type d -path "*/default/$c2" | while read -r d; do [ -e "$d/$frz" ] && echo "$d" && break; done)
        if [ -n "$cg" ]; then result oci-cgroups-path ok "$cg"; else result oci-cgroups-path fail "no default/$c2 beneath $CG_SEARCH: $(find $CG_SEARCH -type d -name "*$c2*" | tr '\n' ' ')"; fi
        run oci-pause $O pause $c2
        expect oci-frozen "$(cat $cg/$frz 2>&1)" "$(v1v2 FROZEN 1)"
        run oci-resume $O resume $c2
        expect oci-thawed "$(cat $cg/$frz 2>&1)" "$(v1v2 THAWED 0)"
        run oci-update $O update --pids-limit 33 $c2
        pcg=$(find $CG_SEARCH -type d -path "*/default/$c2" | while read -r d; do [ -e "$d/pids.max" ] && echo "$d" && break; done)
        expect oci-updated-pids "$(cat $pcg/pids.max 2>&1)" 33
    fi
    $O delete --force $c2 2>&1 | log
fi

run doctor-probe $W doctor --probe procs --max 50

# A login into a zone at its process limit says so (it was a bare EAGAIN): the zone's
# pids.max lowered to what it holds now (the way a fork bomb leaves it), then restored.
z=$(zdir $plain pids)
cat $z/pids.current > $z/pids.max
out=$($W login $plain -- true 2>&1); rc=$?
echo 20 > $z/pids.max
echo "$out" | log
case "$rc:$out" in
0:*) result login-at-limit fail "login worked at the limit" ;;
*"process limit"*) result login-at-limit ok "$(echo "$out" | head -1)" ;;
*) result login-at-limit fail "rc=$rc: $out" ;;
esac

# Suspend and resume (docs/suspend.md): frozen (v1 freezer joined, v2 cgroup.freeze),
# memory paged out, listed as suspended; resumed, it answers again.
run suspend $W suspend $plain
case "$($W list 2>&1 | grep "^$plain ")" in
*suspended*) result suspended-listed ok "$($W list | grep "^$plain ")" ;;
*) result suspended-listed fail "$($W list 2>&1 | tr '\n' ';')" ;;
esac
run resume $W resume $plain
run login-after-resume $W login $plain -- echo resumed

# The contrib unit's commands, from the service cgroup as systemd would run them (the
# warren they name is the one under test).
for f in ${WARREN_SCENARIO_CONTRIB:-/contrib}/*.service; do
    # Only the one-shot units: the daemon's (warren.service) serves until stopped and
    # has tests of its own (tests/daemon.rs, socket activation included).
    grep -q '^Type=oneshot' "$f" || continue
    for key in ExecStartPre ExecStart ExecStop; do
        cmd=$(sed -n "s/^$key=//p" "$f" | head -1 | sed "s#^/usr/local/bin/warren #$W #")
        [ -n "$cmd" ] || continue
        run "unit-$(basename "$f" .service)-$key" $cmd
    done
done

# v2: a session whose parent gives it no controllers: refused with the fix, nothing made.
if [ $CGV = v2 ]; then
nd=/sys/fs/cgroup/nodelegate.slice
mkdir -p $nd/session.scope
out=$(sh -c "echo \$\$ > $nd/session.scope/cgroup.procs && exec $W doctor --zones 1" 2>&1); rc=$?
echo "$out" | log
case "$rc:$out" in
1:*"cgroup delegation"*"will fail"*Delegate=yes*) result v2-refused-undelegated ok "doctor exit 1: $(echo "$out" | grep -m1 'not delegated')" ;;
*) result v2-refused-undelegated fail "rc=$rc: $(echo "$out" | grep -m1 -i delegat)" ;;
esac
left=$(find $nd -mindepth 2 -type d | tr '\n' ' ')
expect v2-nothing-made-undelegated "$left" ""
rmdir $nd/session.scope $nd 2>/dev/null
fi

# v2: the init is cloned into its cgroup (clone3 CLONE_INTO_CGROUP), not migrated: the
# kernel's cgroup_attach_task tracepoint, which every migration fires, stays silent for
# the zone's cgroup, and fires once with WARREN_CLONE_INTO_CGROUP=off.
if [ $CGV = v2 ]; then
    t=/sys/kernel/tracing
    [ -e $t/trace ] || mount -t tracefs tracefs $t 2>/dev/null
    ev=$t/events/cgroup/cgroup_attach_task/enable
    ci=${P}ci
    if [ ! -e $ev ]; then
        result v2-init-cloned-into-cgroup fail "no cgroup_attach_task tracepoint in $t (tracefs not mounted or CONFIG_FTRACE off)"
    elif run create-ci $W create $ci --template bb && run install-ci $W install $ci; then
        for mode in on off; do
            echo > $t/trace
            echo 1 > $ev
            WARREN_CLONE_INTO_CGROUP=$mode $W boot $ci 2>&1 | log
            echo 0 > $ev
            n=$(grep -c "dst_path=[^ ]*/$ci " $t/trace)
            grep cgroup_attach_task $t/trace | log
            $W halt $ci 2>&1 | log
            if [ $mode = on ]; then
                expect v2-init-cloned-into-cgroup "$n" 0
            else
                expect v2-init-migrated-when-off "$n" 1
            fi
        done
        $W delete $ci 2>&1 | log
    else
        result v2-init-cloned-into-cgroup fail "could not create zone $ci"
    fi
fi

# Boot latency with clone3(CLONE_INTO_CGROUP) and with the migration it replaces
# (WARREN_CLONE_INTO_CGROUP=off), interleaved rounds of `bench density` in a state root
# of their own; each round prints its boot median (ms). Under TCG emulation.
if [ -n "$WARREN_VM_MEASURE_ROUNDS" ]; then
    for r in $(seq "$WARREN_VM_MEASURE_ROUNDS"); do
        for mode in on off; do
            out=$(WARREN_CLONE_INTO_CGROUP=$mode $W --root /var/lib/warren/bench-$mode bench density \
                --zones "${WARREN_VM_MEASURE_ZONES:-10}" --idle 1 --template busybox --json \
                --out $TMPD/bench-$mode-$r 2>&1); rc=$?
            med=$(echo "$out" | tr -d ' \n' | grep -o '"boot_ms":{"median":[0-9.]*' | head -1 | sed 's/.*://')
            if [ $rc -eq 0 ] && [ -n "$med" ]; then
                echo "WARREN-VM-MEASURE clone-into-cgroup=$mode round=$r zones=${WARREN_VM_MEASURE_ZONES:-10} boot_median_ms=$med"
            else
                echo "$out" | tail -5 | log
                result "measure-$mode-$r" fail "rc=$rc: $(echo "$out" | tail -2)"
            fi
        done
    done
    rm -rf /var/lib/warren/bench-on /var/lib/warren/bench-off
fi
# The same, one `warren boot` process per boot (as from the CLI or a service), the two
# ways alternating boot by boot; the time is the one `boot` prints.
if [ -n "$WARREN_VM_MEASURE_BOOTS" ] && run create-mz $W create ${P}mz --template bb && run install-mz $W install ${P}mz; then
    for i in $(seq "$WARREN_VM_MEASURE_BOOTS"); do
        for mode in on off; do
            out=$(WARREN_CLONE_INTO_CGROUP=$mode $W boot ${P}mz 2>&1)
            ms=$(echo "$out" | sed -n 's/.*booted in \([0-9.]*\) ms.*/\1/p')
            echo "WARREN-VM-MEASURE cli clone-into-cgroup=$mode boot_ms=${ms:-?} $out" | head -1
            $W halt ${P}mz >/dev/null 2>&1
        done
    done
    $W delete ${P}mz 2>&1 | log
fi
# v2: a cgroup left in a bucket (as a crash between mkdir and boot leaves one) is
# swept by gc, with its bucket.
stray=
if [ $CGV = v2 ]; then
    stray=${svc:-${CG_SEARCH%% *}}/$GROUP/@memory-pids/${P}stray
    mkdir -p "$stray"
fi
run halt $W halt --all
run gc $W gc
if [ -n "$stray" ]; then
    if [ -e "$stray" ]; then result v2-gc-sweeps-buckets fail "$stray left"; else result v2-gc-sweeps-buckets ok "$stray removed"; fi
fi
run swap-disable $W swap disable
if [ -n "$svc" ]; then
    left=$(find $svc -mindepth 1 -type d | grep -v -e '/warren-supervisor$' | tr '\n' ' ')
else
    # Beside other tests: this run's group and OCI leaves only.
    left=$(find $CG_SEARCH -mindepth 1 -type d \( -name "$GROUP" -o -name "*$P*" \) | tr '\n' ' ')
fi
if [ -z "$left" ]; then result empty-tree ok "no zone or container cgroup left beneath $CG_SEARCH"; else result empty-tree fail "left: $left"; fi
