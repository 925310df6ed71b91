16391 getdents64(5, 0x55557ebff120 /* 9 entries */, 32768) = 280
16391 getdents64(5, 0x55557ebff120 /* 0 entries */, 32768) = 0
16391 getdents64(7, 0x55557ebff120 /* 17 entries */, 32768) = 464
16391 getdents64(7, 0x55557ebff120 /* 0 entries */, 32768) = 0
16392 +++ killed by SIGKILL +++
16391 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=16392, si_uid=1092157440, si_status=SIGKILL, si_utime=0, si_stime=0} ---
16391 getdents64(22, 0x55557ebff120 /* 2 entries */, 32768) = 48
16391 getdents64(22, 0x55557ebff120 /* 0 entries */, 32768) = 0
16391 +++ exited with 0 +++
