20871 getdents64(5, 0x555593267120 /* 9 entries */, 32768) = 280
20871 getdents64(5, 0x555593267120 /* 0 entries */, 32768) = 0
20871 getdents64(7, 0x555593267120 /* 17 entries */, 32768) = 464
20871 getdents64(7, 0x555593267120 /* 0 entries */, 32768) = 0
20872 +++ killed by SIGKILL +++
20871 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=20872, si_uid=2392260608, si_status=SIGKILL, si_utime=0, si_stime=0} ---
20871 getdents64(22, 0x555593267120 /* 2 entries */, 32768) = 48
20871 getdents64(22, 0x555593267120 /* 0 entries */, 32768) = 0
20871 +++ exited with 0 +++
