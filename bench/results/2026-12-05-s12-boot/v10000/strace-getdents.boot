24373 getdents64(5, 0x5555866dc270 /* 9 entries */, 32768) = 280
24373 getdents64(5, 0x5555866dc270 /* 0 entries */, 32768) = 0
24373 getdents64(7, 0x5555866dc270 /* 17 entries */, 32768) = 464
24373 getdents64(7, 0x5555866dc270 /* 0 entries */, 32768) = 0
24374 +++ killed by SIGKILL +++
24373 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=24374, si_uid=2429943808, si_status=SIGKILL, si_utime=0, si_stime=0} ---
24373 getdents64(22, 0x5555866dc270 /* 2 entries */, 32768) = 48
24373 getdents64(22, 0x5555866dc270 /* 0 entries */, 32768) = 0
24373 +++ exited with 0 +++
