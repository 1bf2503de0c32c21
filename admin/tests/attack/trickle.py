# A local user (run as uid 1001 by limits.rs) holding N connections to an
# HTTP port, each trickling a request head one byte at a time that never
# ends; a connection the server closes is opened again at once. Prints
# "ready" once N are open, and on stdin's EOF one JSON line of counts.
import json, os, select, socket, sys, threading

host, port = sys.argv[1].rsplit(":", 1)
n = int(sys.argv[2])
counts = {"uid": os.getuid(), "connects": 0, "closed_by_server": 0}
stop = threading.Event()

def connect():
    s = socket.create_connection((host, int(port)))
    s.setblocking(False)
    s.send(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")
    counts["connects"] += 1
    return s

def watch_stdin():
    sys.stdin.read()
    stop.set()

conns = {}
poller = select.poll()

def add():
    s = connect()
    conns[s.fileno()] = s
    poller.register(s, select.POLLIN)

for _ in range(n):
    add()
print("ready", flush=True)
threading.Thread(target=watch_stdin, daemon=True).start()
while not stop.is_set():
    for fd, _ in poller.poll(100):
        s = conns[fd]
        try:
            gone = s.recv(4096) == b""
        except OSError:
            gone = True
        if gone:
            counts["closed_by_server"] += 1
            poller.unregister(fd)
            del conns[fd]
            s.close()
            add()
    for s in list(conns.values()):
        try:
            s.send(b"X")
        except OSError:
            pass
print(json.dumps(counts), flush=True)
