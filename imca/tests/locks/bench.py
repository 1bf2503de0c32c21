# Lock and SQLite costs in one directory (imca/tests/fs_locks.rs, bench_locks):
# prints "locks_per_s sqlite_rows_per_s".
import fcntl
import os
import sqlite3
import sys
import time

d = sys.argv[1]
path = os.path.join(d, "lockfile")
with open(path, "w") as f:
    f.write("x")
fd = os.open(path, os.O_RDWR)
n = 1000
t = time.monotonic()
for i in range(n):
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, i)
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, i)
locks = 2 * n / (time.monotonic() - t)
os.close(fd)

db = os.path.join(d, "bench.sqlite")
con = sqlite3.connect(db, isolation_level=None)
con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT)")
rows = 300
t = time.monotonic()
for k in range(rows // 10):
    con.execute("BEGIN IMMEDIATE")
    for j in range(10):
        con.execute("INSERT INTO t(pad) VALUES (?)", ("x" * 200,))
    con.execute("COMMIT")
sql = rows / (time.monotonic() - t)
con.close()
print(f"{locks:.0f} {sql:.0f}")
