cd /work/main/bench/results/2026-12-05-s16-vm-crun/guest
bash -c root=\$\(mktemp\ -d\ /tmp/density.XXXX\)\;\ WARREN_ROOT=\$root\ /work/notes/s16/bin-vm/warren\ bench\ density\ --zones\ 10\,100\ --compare\ crun\,crun-nocgroups\ --template\ busybox\ --out\ /work/main/bench/results/2026-12-05-s16-vm-crun/guest/run 
