% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 41.33    0.002125          27        77         4 openat
  6.53    0.000336          84         4           fsync
  5.76    0.000296           2       137           read
  5.66    0.000291         291         1           pivot_root
  5.50    0.000283         141         2           clone
  4.65    0.000239          13        18        10 mkdir
  4.01    0.000206          41         5           getdents64
  3.64    0.000187           6        29         6 mount
  3.50    0.000180           7        25           write
  2.98    0.000153           1        89           close
  2.39    0.000123          30         4           rename
  2.35    0.000121           2        48        11 statx
  2.24    0.000115           3        33         1 prctl
  2.20    0.000113         113         1           seccomp
  0.91    0.000047           7         6           rt_sigaction
  0.76    0.000039          39         1           umount2
  0.68    0.000035           5         6           mknodat
  0.53    0.000027          13         2           munmap
  0.47    0.000024           8         3           open_tree
  0.43    0.000022          11         2           ioctl
  0.39    0.000020           6         3           readlink
  0.35    0.000018           6         3           pipe2
  0.33    0.000017           3         5           symlink
  0.27    0.000014           1         9           fchownat
  0.25    0.000013          13         1           wait4
  0.19    0.000010           2         4           setns
  0.18    0.000009           3         3           unshare
  0.16    0.000008           4         2           mmap
  0.14    0.000007           3         2           kill
  0.14    0.000007           1         4           flock
  0.12    0.000006           6         1           socket
  0.10    0.000005           0         6           getpid
  0.10    0.000005           2         2           chdir
  0.10    0.000005           1         3           mount_setattr
  0.08    0.000004           1         3           dup2
  0.08    0.000004           1         4           geteuid
  0.06    0.000003           0         7           brk
  0.06    0.000003           1         2           setgroups
  0.06    0.000003           1         2           setresuid
  0.06    0.000003           3         1           sethostname
  0.06    0.000003           3         1           dup3
  0.06    0.000003           0         4           close_range
  0.04    0.000002           1         2           lseek
  0.04    0.000002           1         2           setresgid
  0.04    0.000002           0         3           newfstatat
  0.02    0.000001           0         2           umask
  0.02    0.000001           1         1           capset
  0.02    0.000001           0         3           sigaltstack
  0.02    0.000001           0         2           getrandom
  0.00    0.000000           0         1           poll
  0.00    0.000000           0         2           mprotect
  0.00    0.000000           0         1           execve
  0.00    0.000000           0         1           getppid
  0.00    0.000000           0         1           arch_prctl
  0.00    0.000000           0         1           gettid
  0.00    0.000000           0         1           sched_getaffinity
  0.00    0.000000           0         1           set_tid_address
  0.00    0.000000           0         1           set_robust_list
  0.00    0.000000           0         2           prlimit64
  0.00    0.000000           0         1           rseq
  0.00    0.000000           0         2           move_mount
  0.00    0.000000           0         4           openat2
------ ----------- ----------- --------- --------- ------------------
100.00    0.005142           8       599        32 total
