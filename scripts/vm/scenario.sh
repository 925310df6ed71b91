#!/bin/sh
# The guest's scenario: warren on a cgroup v2 host, run from a service's cgroup that
# holds other processes. Every check prints one line
#   WARREN-VM-RESULT <check> ok|fail <detail>
# that crates/warren/tests/cgroup_v2_vm.rs asserts on; WARREN-VM-LOG lines carry
# output for a failure's diagnosis. Checks go on after a failure.
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
svc=${WARREN_VM_SERVICE:?}
W=warren
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

result setup ok "warren runs in $(cut -d: -f3 /proc/self/cgroup) beside pid $(head -1 $svc/cgroup.procs)"
run info $W info
run doctor $W doctor --zones 10
run template $W template create bb --busybox
case "$($W info 2>&1)" in
*"userns zones:  ok"*) result info-userns ok "$($W info | grep 'userns zones')" ;;
*) result info-userns fail "$($W info 2>&1 | grep -A1 'userns zones')" ;;
esac
# The doctor names the missing feature: a state root on tmpfs has idmapped mounts only
# from Linux 6.3 on.
out=$($W --root /tmp/tmpfs-root doctor --zones 1 2>&1); rc=$?
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
rm -rf /tmp/tmpfs-root

# A zone without user namespaces, every cgroup v2 limit it can take.
run create-plain $W create plain --template bb --set userns=false --set memory.max=32M \
    --set max-processes=20 --set cpu.max=0.5 --set memory.request=8M --set cpu.weight=50 \
    --set caps.add=CAP_MKNOD
run install-plain $W install plain
if run boot-plain $W boot plain; then
    z=$(find /sys/fs/cgroup -type d -name plain | head -1)
    result zone-cgroup ok "$z"
    expect memory.max "$(cat $z/memory.max)" 33554432
    expect memory.low "$(cat $z/memory.low)" 8388608
    expect pids.max "$(cat $z/pids.max)" 20
    expect cpu.max "$(cat $z/cpu.max)" "50000 100000"
    expect cpu.weight "$(cat $z/cpu.weight)" 50
    run login-plain $W login plain -- echo hello
    # Device control on v2 (the BPF device filter): the zone, given CAP_MKNOD, may make
    # and use a node of an allowed device, but not make and read one for the VM's disk.
    run devices-allowed $W login plain -- sh -c 'head -c 4 /dev/urandom >/dev/null && echo urandom ok'
    disk=$(cat /sys/block/vda/dev)
    # In the zone's own /dev (a tmpfs warren makes): the zone's root filesystem is
    # mounted nodev, so a node elsewhere opens nothing whatever the device filter says.
    run mknod-allowed-node $W login plain -- sh -c 'mknod /dev/wnull c 1 3 && echo x > /dev/wnull && echo "mknod of 1:3 works: the zone has CAP_MKNOD"'
    out=$($W login plain -- sh -c "mknod /dev/wdisk b ${disk%:*} ${disk#*:} && head -c 512 /dev/wdisk | wc -c" 2>&1); rc=$?
    echo "$out" | log
    if [ $rc -ne 0 ]; then result devices-disk-denied ok "rc=$rc: $(echo "$out" | tail -1)"; else result devices-disk-denied fail "the zone read the disk $disk: $out"; fi
    # OOM inside the zone only: dd's 64 MiB buffer does not fit in 32 MiB.
    $W login plain -- dd if=/dev/zero of=/dev/null bs=64M count=1 2>&1 | log
    kills=$(awk '/^oom_kill / {print $2}' $z/memory.events)
    if [ "${kills:-0}" -ge 1 ]; then result oom-kill ok "memory.events oom_kill $kills"; else result oom-kill fail "memory.events: $(cat $z/memory.events)"; fi
    case "$($W list 2>&1)" in
    *"running, oom-killed ("*) result list-oom-killed ok "$($W list | grep plain)" ;;
    *) result list-oom-killed fail "$($W list 2>&1 | grep plain)" ;;
    esac
    # The process cap: 40 sleepers asked for, pids.max 20 holds.
    $W login plain -- sh -c 'for i in $(seq 40); do sleep 3 & done 2>/dev/null; wait' 2>&1 | tail -2 | log
    max=$(awk '/^max / {print $2}' $z/pids.events)
    if [ "${max:-0}" -ge 1 ]; then result pids-cap ok "pids.events max $max"; else result pids-cap fail "pids.events: $(cat $z/pids.events)"; fi
    # The sleepers the shell left when its fork failed (busybox sh exits on a failed
    # fork) hold the cap for up to 3 s: wait until only init is left, so the busy loop
    # below can fork its `date`.
    for _ in $(seq 50); do [ "$(cat $z/pids.current)" -le 1 ] && break; sleep 0.2; done
    # cpu.max 0.5: a busy loop for 3 s gets about 1.5 s of CPU.
    before=$(awk '/^usage_usec/ {print $2}' $z/cpu.stat)
    $W login plain -- sh -c 'end=$(($(date +%s)+3)); while [ $(date +%s) -lt $end ]; do :; done' 2>&1 | log
    after=$(awk '/^usage_usec/ {print $2}' $z/cpu.stat)
    used=$(( (after - before) / 1000 ))
    if [ $used -le 2200 ] && [ $used -ge 300 ]; then result cpu-max ok "${used} ms of CPU in 3 s"; else result cpu-max fail "${used} ms of CPU in 3 s under cpu.max 0.5"; fi
    run stat $W stat plain
    run memstat $W memstat
fi

# The default zone: user namespaces on.
run create-userns $W create uz --template bb
run install-userns $W install uz
if run boot-userns $W boot uz; then
    run login-userns $W login uz -- id
    # Controllers only for the limits set: cpu (another zone's cpu.max), no cpuset, no io.
    z=$(find /sys/fs/cgroup -type d -name uz | head -1)
    expect only-needed-controllers "$(cat $z/cgroup.controllers)" "cpu memory pids"
    # Live limits: config set on the running zone changes its v2 files at once.
    if run live-set $W config set uz memory.max=48M cpu.max=0.25 max-processes=30; then
        expect live-memory.max "$(cat $z/memory.max)" 50331648
        expect live-cpu.max "$(cat $z/cpu.max)" "25000 100000"
        expect live-pids.max "$(cat $z/pids.max)" 30
    fi
    run live-only $W config set uz --live-only memory.max=40M
    out=$($W list -v 2>&1)
    case "$out" in
    *"in force memory.max=41943040 (configured 50331648)"*) result live-in-force ok "$(echo "$out" | grep uz)" ;;
    *) result live-in-force fail "$(echo "$out" | grep uz)" ;;
    esac
fi

# An init that dies at once: boot says so with its status, list shows it.
run create-false $W create bad --template bb --set init=/bin/false
run install-false $W install bad
out=$($W boot bad 2>&1); rc=$?
echo "$out" | log
case "$rc:$out" in
1:*"exited with status 1"*) result init-exit-reported ok "$(echo "$out" | head -1)" ;;
*) result init-exit-reported fail "rc=$rc: $out" ;;
esac
case "$($W list 2>&1)" in
*"installed, exited (status 1)"*) result list-exited ok "$($W list | grep bad)" ;;
*) result list-exited fail "$($W list 2>&1 | grep bad)" ;;
esac

# memory.swap -> memory.swap.max, with warren's own zram swap: 24 MiB in a 16 MiB zone
# fit only through swap.
if run swap-enable $W swap enable --size 256M --zram; then
    run create-swap $W create sw --template bb --set userns=false --set memory.max=16M --set memory.swap=64M
    run install-swap $W install sw
    if run boot-swap $W boot sw; then
        z=$(find /sys/fs/cgroup -type d -name sw | head -1)
        expect memory.swap.max "$(cat $z/memory.swap.max)" 67108864
        run swap-used $W login sw -- dd if=/dev/zero of=/dev/null bs=24M count=1
        kills=$(awk '/^oom_kill / {print $2}' $z/memory.events)
        expect swap-no-oom "${kills:-0}" 0
        $W halt sw 2>&1 | log
    fi
fi

# disk.max: the zone's writes go to a capped ext4 image; past the cap, ENOSPC. And a
# cpuset, checked in the v2 file.
run create-disk $W create dq --template bb --set disk.max=32M --set cpuset=1
run install-disk $W install dq
if run boot-disk $W boot dq; then
    z=$(find /sys/fs/cgroup -type d -name dq | head -1)
    expect cpuset.cpus "$(cat $z/cpuset.cpus.effective)" 1
    out=$($W login dq -- dd if=/dev/zero of=/big bs=1M count=64 2>&1); rc=$?
    echo "$out" | log
    case "$rc:$out" in
    0:*) result disk-max-enospc fail "64 MiB written under disk.max 32M" ;;
    *"space"*) result disk-max-enospc ok "$(echo "$out" | grep -m1 -i space)" ;;
    *) result disk-max-enospc fail "rc=$rc: $out" ;;
    esac
    $W halt dq 2>&1 | log
fi

# Bridged networking: eth0 on warren0, the gateway answers.
run create-bridge $W create nz --template bb --set net=bridge
run install-bridge $W install nz
if run boot-bridge $W boot nz; then
    run ping-gateway $W login nz -- ping -c1 -W5 10.231.0.1
    $W halt nz 2>&1 | log
fi

run agent-once $W agent --once
# A real eviction: thresholds every host crosses (less than 100 % available), no grace;
# the best-effort zone goes first, through a graceful halt, and is shown evicted.
run create-be $W create be --template bb --set priority=best-effort
run install-be $W install be
if run boot-be $W boot be; then
    printf 'interval-ms = 50\nwindow-s = 0.5\n[available]\ntrigger = 100.0\nclear = 100.0\ngrace-s = 0.0\n' > /tmp/agent.toml
    run agent-evicts $W agent --once --config /tmp/agent.toml
    case "$($W list 2>&1)" in
    *be*evicted*) result evicted-listed ok "$($W list | grep '^be')" ;;
    *) result evicted-listed fail "$($W list 2>&1 | tr '\n' ';')" ;;
    esac
fi

# The OCI runtime, from the same cgroup.
mkdir -p /tmp/bundle/rootfs/bin && cp /bin/busybox /tmp/bundle/rootfs/bin/busybox
for a in sh true echo; do ln -sf busybox /tmp/bundle/rootfs/bin/$a; done
if run oci-spec $W oci spec --bundle /tmp/bundle; then
    sed -i -e 's/"terminal": *true/"terminal": false/' -e 's/"sh"/"sh","-c","echo oci-ok"/' /tmp/bundle/config.json
    out=$($W oci --root /run/warren-oci run --bundle /tmp/bundle c1 2>&1)
    echo "$out" | log
    case "$out" in *oci-ok*) result oci-run ok "$(echo "$out" | tail -1)" ;; *) result oci-run fail "$(echo "$out" | tail -2)" ;; esac
    $W oci --root /run/warren-oci delete --force c1 2>&1 | log
    # linux.cgroupsPath names the leaf beneath the runtime's own group; pause and
    # resume through cgroup.freeze.
    sed -e 's/"sh","-c","echo oci-ok"/"sleep","600"/' -e 's/"linux": *{/"linux": {"cgroupsPath": "\/default\/c2",/' \
        /tmp/bundle/config.json > /tmp/bundle/config2.json && mv /tmp/bundle/config2.json /tmp/bundle/config.json
    ln -sf busybox /tmp/bundle/rootfs/bin/sleep
    O="$W oci --root /run/warren-oci"
    # The created process keeps the runtime's stdio (as with runc): files, not a pipe.
    $O create --bundle /tmp/bundle c2 </dev/null >/tmp/oci-create.log 2>&1; rc=$?
    log < /tmp/oci-create.log
    if [ $rc -eq 0 ]; then result oci-create ok c2; else result oci-create fail "rc=$rc: $(tail -2 /tmp/oci-create.log)"; fi
    if [ $rc -eq 0 ] && run oci-start $O start c2; then
        cg=$(find $svc -type d -name default-c2 | head -1)
        if [ -n "$cg" ]; then result oci-cgroups-path ok "$cg"; else result oci-cgroups-path fail "no default-c2 beneath $svc: $(find $svc -type d | tr '\n' ' ')"; fi
        run oci-pause $O pause c2
        expect oci-frozen "$(cat $cg/cgroup.freeze 2>&1)" 1
        run oci-resume $O resume c2
        expect oci-thawed "$(cat $cg/cgroup.freeze 2>&1)" 0
    fi
    $O delete --force c2 2>&1 | log
fi

run doctor-probe $W doctor --probe procs --max 50

# A login into a zone at its process limit says so (it was a bare EAGAIN): the zone's
# pids.max lowered to what it holds now (the way a fork bomb leaves it), then restored.
z=$(find /sys/fs/cgroup -type d -name plain | head -1)
cat $z/pids.current > $z/pids.max
out=$($W login plain -- true 2>&1); rc=$?
echo 20 > $z/pids.max
echo "$out" | log
case "$rc:$out" in
0:*) result login-at-limit fail "login worked at the limit" ;;
*"process limit"*) result login-at-limit ok "$(echo "$out" | head -1)" ;;
*) result login-at-limit fail "rc=$rc: $out" ;;
esac

# The contrib unit's commands, from the service cgroup as systemd would run them.
for f in /contrib/*.service; do
    for key in ExecStartPre ExecStart ExecStop; do
        cmd=$(sed -n "s/^$key=//p" "$f" | head -1)
        [ -n "$cmd" ] || continue
        run "unit-$(basename "$f" .service)-$key" $cmd
    done
done

# A session whose parent gives it no controllers: refused with the fix, nothing made.
nd=/sys/fs/cgroup/nodelegate.slice
mkdir -p $nd/session.scope
out=$(sh -c "echo \$\$ > $nd/session.scope/cgroup.procs && exec $W doctor --zones 1" 2>&1); rc=$?
echo "$out" | log
case "$rc:$out" in
1:*"cgroup delegation"*"will fail"*Delegate=yes*) result refused-undelegated ok "doctor exit 1: $(echo "$out" | grep -m1 'not delegated')" ;;
*) result refused-undelegated fail "rc=$rc: $(echo "$out" | grep -m1 -i delegat)" ;;
esac
left=$(find $nd -mindepth 2 -type d | tr '\n' ' ')
expect nothing-made-undelegated "$left" ""
rmdir $nd/session.scope $nd 2>/dev/null

run halt $W halt --all
run gc $W gc
run swap-disable $W swap disable
left=$(find $svc -mindepth 1 -type d | grep -v -e '/warren-supervisor$' | tr '\n' ' ')
if [ -z "$left" ]; then result empty-tree ok "only $(ls $svc | grep -c '') entries, no zone cgroups"; else result empty-tree fail "left: $left"; fi
