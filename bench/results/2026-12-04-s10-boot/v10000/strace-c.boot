% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 40.25    0.003266        3266         1           pivot_root
  8.89    0.000721           9        79         5 openat
  7.83    0.000635           5       126           read
  6.89    0.000559         279         2           setresuid
  4.78    0.000388          25        15        10 mkdir
  4.31    0.000350           3        95           close
  4.15    0.000337          13        25           write
  3.46    0.000281           5        56        11 statx
  2.77    0.000225         112         2           clone
  2.46    0.000200           6        31         6 mount
  1.49    0.000121         121         1           seccomp
  1.45    0.000118          59         2           rename
  1.31    0.000106           3        33         1 prctl
  1.08    0.000088           4        22           newfstatat
  0.83    0.000067          33         2           munmap
  0.76    0.000062          20         3           readlink
  0.69    0.000056          56         1           unlinkat
  0.67    0.000054           5        10           brk
  0.60    0.000049           8         6           getdents64
  0.49    0.000040          10         4           open_tree
  0.46    0.000037          18         2           poll
  0.32    0.000026          26         1           umount2
  0.32    0.000026           6         4           setns
  0.30    0.000024          24         1           wait4
  0.27    0.000022          11         2           mprotect
  0.25    0.000020           4         5           readlinkat
  0.23    0.000019           6         3           pipe2
  0.22    0.000018           2         7           fcntl
  0.21    0.000017           2         6           rt_sigaction
  0.20    0.000016           4         4           mount_setattr
  0.17    0.000014           7         2           mmap
  0.17    0.000014           4         3           unshare
  0.16    0.000013           4         3           flock
  0.15    0.000012           3         4           getpid
  0.15    0.000012           6         2           kill
  0.12    0.000010           2         4           geteuid
  0.11    0.000009           3         3           dup2
  0.10    0.000008           2         3           sigaltstack
  0.10    0.000008           8         1           pidfd_open
  0.09    0.000007           3         2           setgroups
  0.09    0.000007           3         2           getrandom
  0.07    0.000006           3         2           lseek
  0.07    0.000006           3         2           setresgid
  0.07    0.000006           3         2           prlimit64
  0.05    0.000004           2         2           chdir
  0.05    0.000004           4         1           capset
  0.05    0.000004           4         1           sched_getaffinity
  0.05    0.000004           1         4           close_range
  0.04    0.000003           3         1           rt_sigprocmask
  0.04    0.000003           1         2           umask
  0.04    0.000003           3         1           arch_prctl
  0.04    0.000003           3         1           set_tid_address
  0.02    0.000002           2         1           gettid
  0.02    0.000002           2         1           set_robust_list
  0.02    0.000002           2         1           rseq
  0.00    0.000000           0         2           ioctl
  0.00    0.000000           0         1           socket
  0.00    0.000000           0         1           execve
  0.00    0.000000           0         1           getppid
  0.00    0.000000           0         1           sethostname
  0.00    0.000000           0         2           fchownat
  0.00    0.000000           0         2           dup3
  0.00    0.000000           0         3           move_mount
  0.00    0.000000           0         4           openat2
------ ----------- ----------- --------- --------- ------------------
100.00    0.008114          13       619        33 total
