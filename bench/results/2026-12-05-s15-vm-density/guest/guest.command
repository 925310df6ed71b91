cd /work/main/bench/results/2026-12-05-s15-vm-density/guest
bash -c root=\$\(mktemp\ -d\ /tmp/density.XXXX\)\;\ WARREN_ROOT=\$root\ /work/notes/s15/target/x86_64-unknown-linux-gnu/release/warren\ bench\ density\ --zones\ 10\,100\ --compare\ crun\,lxc\ --template\ busybox\ --out\ /work/main/bench/results/2026-12-05-s15-vm-density/guest/run 
