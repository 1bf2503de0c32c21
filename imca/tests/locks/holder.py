# A process that holds fcntl locks on one file (imca/tests/fs_lock_recovery.rs),
# so the test process itself keeps no descriptor on that gateway's mount.
# Reads commands on stdin, one a line, and answers each with one line:
#   lock START LEN     F_SETLK F_WRLCK  ->  "ok" or the errno's name (EAGAIN, EIO, ...)
#   unlock START LEN   F_SETLK F_UNLCK  ->  same
# Prints "ready" once the file is open.
import errno
import fcntl
import os
import sys

fd = os.open(sys.argv[1], os.O_RDWR)
print("ready", flush=True)
for line in sys.stdin:
    cmd, start, length = line.split()
    op = fcntl.LOCK_EX | fcntl.LOCK_NB if cmd == "lock" else fcntl.LOCK_UN
    try:
        fcntl.lockf(fd, op, int(length), int(start), os.SEEK_SET)
        print("ok", flush=True)
    except OSError as e:
        # (lockf's EACCES is fcntl's EAGAIN)
        print("EAGAIN" if e.errno == errno.EACCES else errno.errorcode[e.errno], flush=True)
