# One SQLite writer (imca/tests/fs_locks.rs): inserts ROWS rows as WHO in
# transactions of 10, against another gateway's writer; prints how many rows
# were committed (acknowledged: COMMIT returned).
#
# MODE "delete": rollback journal, one connection, SQLite's busy handler.
# MODE "wal-exclusive": WAL with locking_mode=EXCLUSIVE (the WAL index in
# the process's memory, not in a shared -shm mapping). Such a connection
# keeps its shared lock, so two writers that both read can only wait for
# each other (on a local disk too): on "locked", close (dropping the
# locks and the unfinished transaction), back off a random moment, retry.
import random
import sqlite3
import sys
import time

path, who, rows, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def connect():
    con = sqlite3.connect(path, timeout=120, isolation_level=None)
    if mode == "wal-exclusive":
        con.execute("PRAGMA busy_timeout=200")
        # Before the first access: the database (WAL since its creation)
        # is then opened with its WAL index in this process's memory.
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
    else:
        con.execute("PRAGMA busy_timeout=120000")
    return con


def transaction(con, t):
    con.execute("BEGIN IMMEDIATE")
    for j in range(10):
        con.execute("INSERT INTO t(who, i, pad) VALUES (?, ?, ?)", (who, t * 10 + j, "x" * 200))
    con.execute("COMMIT")


con = connect()
acked = 0
deadline = time.monotonic() + 120
for t in range(rows // 10):
    while True:
        if mode == "wal-exclusive":
            con.close()  # let the other writer in between transactions
            con = connect()
        try:
            transaction(con, t)
            break
        except sqlite3.OperationalError as e:
            if mode != "wal-exclusive" or "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.01, 0.2))
    acked += 10
con.close()
print(acked)
