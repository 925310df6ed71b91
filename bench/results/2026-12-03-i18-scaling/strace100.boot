% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 28.34    0.000469           6        77         4 openat
 23.26    0.000385           4        89           close
 11.24    0.000186          46         4           fsync
  9.61    0.000159           6        25           write
  7.01    0.000116          29         4           rename
  6.47    0.000107           0       137           read
  3.93    0.000065          32         2           munmap
  1.81    0.000030           0        48        11 statx
  1.69    0.000028           4         6           getpid
  1.69    0.000028           9         3           readlink
  1.45    0.000024          24         1           wait4
  0.91    0.000015           7         2           kill
  0.91    0.000015           3         4           flock
  0.91    0.000015           0        18        10 mkdir
  0.79    0.000013           4         3           sigaltstack
  0.00    0.000000           0         1           poll
  0.00    0.000000           0         2           lseek
  0.00    0.000000           0         2           mmap
  0.00    0.000000           0         2           mprotect
  0.00    0.000000           0         7           brk
  0.00    0.000000           0         6           rt_sigaction
  0.00    0.000000           0         2           ioctl
  0.00    0.000000           0         3           dup2
  0.00    0.000000           0         1           socket
  0.00    0.000000           0         2           clone
  0.00    0.000000           0         1           execve
  0.00    0.000000           0         2           chdir
  0.00    0.000000           0         5           symlink
  0.00    0.000000           0         2           umask
  0.00    0.000000           0         4           geteuid
  0.00    0.000000           0         1           getppid
  0.00    0.000000           0         2           setgroups
  0.00    0.000000           0         2           setresuid
  0.00    0.000000           0         2           setresgid
  0.00    0.000000           0         1           capset
  0.00    0.000000           0         1           pivot_root
  0.00    0.000000           0        33         1 prctl
  0.00    0.000000           0         1           arch_prctl
  0.00    0.000000           0        29         6 mount
  0.00    0.000000           0         1           umount2
  0.00    0.000000           0         1           sethostname
  0.00    0.000000           0         1           gettid
  0.00    0.000000           0         1           sched_getaffinity
  0.00    0.000000           0         4           getdents64
  0.00    0.000000           0         1           set_tid_address
  0.00    0.000000           0         6           mknodat
  0.00    0.000000           0         9           fchownat
  0.00    0.000000           0         3           newfstatat
  0.00    0.000000           0         3           unshare
  0.00    0.000000           0         1           set_robust_list
  0.00    0.000000           0         1           dup3
  0.00    0.000000           0         3           pipe2
  0.00    0.000000           0         2           prlimit64
  0.00    0.000000           0         4           setns
  0.00    0.000000           0         1           seccomp
  0.00    0.000000           0         2           getrandom
  0.00    0.000000           0         1           rseq
  0.00    0.000000           0         3           open_tree
  0.00    0.000000           0         2           move_mount
  0.00    0.000000           0         4           close_range
  0.00    0.000000           0         4           openat2
  0.00    0.000000           0         3           mount_setattr
------ ----------- ----------- --------- --------- ------------------
100.00    0.001655           2       598        32 total
