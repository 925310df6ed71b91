% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 40.29    0.003298        3298         1           pivot_root
 19.89    0.001628         108        15        10 mkdir
  6.26    0.000512         256         2           setresuid
  6.12    0.000501         250         2           rename
  5.20    0.000426           5        79         5 openat
  4.03    0.000330          13        25           write
  2.75    0.000225           2        95           close
  2.58    0.000211         105         2           clone
  2.58    0.000211           6        31         6 mount
  1.54    0.000126         126         1           seccomp
  1.22    0.000100           3        33         1 prctl
  0.90    0.000074           0       126           read
  0.70    0.000057          57         1           unlinkat
  0.54    0.000044           0        56        11 statx
  0.53    0.000043          10         4           open_tree
  0.49    0.000040          20         2           poll
  0.45    0.000037          12         3           dup2
  0.39    0.000032          32         1           umount2
  0.37    0.000030          10         3           readlink
  0.35    0.000029           7         4           setns
  0.34    0.000028          14         2           munmap
  0.29    0.000024          24         1           wait4
  0.26    0.000021           7         3           pipe2
  0.21    0.000017           4         4           mount_setattr
  0.20    0.000016           2         6           getdents64
  0.18    0.000015           5         3           unshare
  0.16    0.000013           6         2           kill
  0.16    0.000013          13         1           pidfd_open
  0.15    0.000012           6         2           mmap
  0.15    0.000012           1         7           fcntl
  0.15    0.000012           0        22           newfstatat
  0.13    0.000011           2         4           getpid
  0.07    0.000006           3         2           setgroups
  0.06    0.000005           2         2           chdir
  0.06    0.000005           2         2           setresgid
  0.05    0.000004           1         3           flock
  0.04    0.000003           1         2           lseek
  0.04    0.000003           3         1           rt_sigprocmask
  0.04    0.000003           3         1           capset
  0.04    0.000003           1         3           sigaltstack
  0.04    0.000003           0         4           close_range
  0.02    0.000002           1         2           umask
  0.00    0.000000           0         2           mprotect
  0.00    0.000000           0        10           brk
  0.00    0.000000           0         6           rt_sigaction
  0.00    0.000000           0         2           ioctl
  0.00    0.000000           0         1           socket
  0.00    0.000000           0         1           execve
  0.00    0.000000           0         4           geteuid
  0.00    0.000000           0         1           getppid
  0.00    0.000000           0         1           arch_prctl
  0.00    0.000000           0         1           sethostname
  0.00    0.000000           0         1           gettid
  0.00    0.000000           0         1           sched_getaffinity
  0.00    0.000000           0         1           set_tid_address
  0.00    0.000000           0         2           fchownat
  0.00    0.000000           0         5           readlinkat
  0.00    0.000000           0         1           set_robust_list
  0.00    0.000000           0         2           dup3
  0.00    0.000000           0         2           prlimit64
  0.00    0.000000           0         2           getrandom
  0.00    0.000000           0         1           rseq
  0.00    0.000000           0         3           move_mount
  0.00    0.000000           0         4           openat2
------ ----------- ----------- --------- --------- ------------------
100.00    0.008185          13       619        33 total
