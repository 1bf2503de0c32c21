# One SQLite writer (imca/tests/fs_locks.rs): inserts ROWS rows as WHO in
# transactions of 10, waiting on SQLite's busy handler for the other
# gateway's writer; prints how many rows were committed (acknowledged).
import sqlite3
import sys

path, who, rows, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
con = sqlite3.connect(path, timeout=120, isolation_level=None)
con.execute("PRAGMA busy_timeout=120000")
if mode == "wal":
    con.execute("PRAGMA journal_mode=WAL")
acked = 0
for t in range(rows // 10):
    con.execute("BEGIN IMMEDIATE")
    for j in range(10):
        con.execute("INSERT INTO t(who, i, pad) VALUES (?, ?, ?)", (who, t * 10 + j, "x" * 200))
    con.execute("COMMIT")
    acked += 10
con.close()
print(acked)
