% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 35.47    0.003386        3386         1           pivot_root
 18.35    0.001752         116        15        10 mkdir
  6.50    0.000621           7        79         5 openat
  6.11    0.000583           4       126           read
  5.16    0.000493         246         2           setresuid
  3.89    0.000371           5        71        11 statx
  3.43    0.000327           3        95           close
  2.66    0.000254         127         2           clone
  2.51    0.000240          16        15           clock_nanosleep
  2.23    0.000213           6        31         6 mount
  1.57    0.000150           8        18           readlink
  1.33    0.000127           5        25           write
  1.25    0.000119         119         1           seccomp
  1.10    0.000105           3        33         1 prctl
  1.10    0.000105          17         6           getdents64
  1.03    0.000098          49         2           rename
  0.88    0.000084           3        22           newfstatat
  0.64    0.000061           8         7           fcntl
  0.56    0.000053          53         1           unlinkat
  0.51    0.000049          12         4           open_tree
  0.40    0.000038          19         2           munmap
  0.36    0.000034          17         2           poll
  0.35    0.000033           3        10           brk
  0.32    0.000031          31         1           umount2
  0.23    0.000022           7         3           pipe2
  0.21    0.000020          20         1           wait4
  0.19    0.000018           4         4           setns
  0.18    0.000017           3         5           readlinkat
  0.18    0.000017           4         4           mount_setattr
  0.17    0.000016           8         2           mmap
  0.15    0.000014           4         3           unshare
  0.13    0.000012           4         3           flock
  0.12    0.000011           5         2           kill
  0.10    0.000010           2         4           getpid
  0.09    0.000009           3         3           dup2
  0.09    0.000009           2         4           geteuid
  0.08    0.000008           8         1           pidfd_open
  0.05    0.000005           2         2           lseek
  0.05    0.000005           2         2           chdir
  0.05    0.000005           2         2           setgroups
  0.04    0.000004           2         2           setresgid
  0.04    0.000004           4         1           capset
  0.03    0.000003           3         1           rt_sigprocmask
  0.03    0.000003           1         3           sigaltstack
  0.03    0.000003           1         2           getrandom
  0.03    0.000003           0         4           close_range
  0.02    0.000002           1         2           umask
  0.00    0.000000           0         2           mprotect
  0.00    0.000000           0         6           rt_sigaction
  0.00    0.000000           0         2           ioctl
  0.00    0.000000           0         1           socket
  0.00    0.000000           0         1           execve
  0.00    0.000000           0         1           getppid
  0.00    0.000000           0         1           arch_prctl
  0.00    0.000000           0         1           sethostname
  0.00    0.000000           0         1           gettid
  0.00    0.000000           0         1           sched_getaffinity
  0.00    0.000000           0         1           set_tid_address
  0.00    0.000000           0         2           fchownat
  0.00    0.000000           0         1           set_robust_list
  0.00    0.000000           0         2           dup3
  0.00    0.000000           0         2           prlimit64
  0.00    0.000000           0         1           rseq
  0.00    0.000000           0         3           move_mount
  0.00    0.000000           0         4           openat2
------ ----------- ----------- --------- --------- ------------------
100.00    0.009547          14       664        33 total
