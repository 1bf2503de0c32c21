# One SQLite writer (imca/tests/fs_locks.rs): inserts ROWS rows as WHO in
# transactions of 10, waiting on SQLite's busy handler for the other
# gateway's writer; prints how many rows were committed (acknowledged).
#
# MODE "delete": rollback journal, one connection throughout.
# MODE "wal-exclusive": WAL with locking_mode=EXCLUSIVE (the WAL index in
# the process's memory, not in a shared -shm mapping), one connection per
# transaction so the writers take turns.
import sqlite3
import sys

path, who, rows, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def connect():
    con = sqlite3.connect(path, timeout=120, isolation_level=None)
    con.execute("PRAGMA busy_timeout=120000")
    if mode == "wal-exclusive":
        # Before the first access: the database (WAL since its creation)
        # is then opened with its WAL index in this process's memory.
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
    return con


con = connect()
acked = 0
for t in range(rows // 10):
    if mode == "wal-exclusive":
        con.close()
        con = connect()
    con.execute("BEGIN IMMEDIATE")
    for j in range(10):
        con.execute("INSERT INTO t(who, i, pad) VALUES (?, ?, ?)", (who, t * 10 + j, "x" * 200))
    con.execute("COMMIT")
    acked += 10
con.close()
print(acked)
