# An ordinary local user (run as uid 1001 by attack_suite.rs) attacking a
# storage server's RPC port with its own client: it knows the protocol, not
# the volume secret. Prints one JSON object of what happened.
import json, os, socket, struct, sys

# The protocol version comes from the test (transport::tcp::PROTOCOL_VERSION):
# an attacker speaks the server's current protocol, so a refusal is about
# credentials, never about a stale version.
addr, secret_file, version = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = addr.rsplit(":", 1)
out = {"uid": os.getuid()}

try:
    open(secret_file).read()
    out["secret"] = "read"
except PermissionError:
    out["secret"] = "denied"

def hello(flags, nonce):
    # "IMCA" u16 version u16 status u32 max_frame u32 idle | u32 flags u32 0 | nonce[32] | proof[32]
    return b"IMCA" + struct.pack("<HHIIII", version, 0, 1 << 20, 0, flags, 0) + nonce + bytes(32)

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            break
        b += c
    return b

def status(b):
    return struct.unpack("<H", b[6:8])[0] if len(b) >= 8 else None

# 1. No credentials at all: a read request right behind the hello.
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(hello(0, os.urandom(32)))
first = recv_exact(s, 8)
out["no_credentials"] = {"status": status(first), "len": len(first)}
s.close()

# 2. Claims credentials, answers the challenge with a guess, then sends a frame.
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(hello(1, os.urandom(32)))
theirs = recv_exact(s, 88)
s.sendall(os.urandom(32))
s.sendall(struct.pack("<IQI", 12 + 4, 1, 4) + b"junk")
verdict = recv_exact(s, 8)
rest = b""
try:
    while True:
        c = s.recv(4096)
        if not c:
            break
        rest += c
except (ConnectionResetError, socket.timeout):
    pass
out["guessed_proof"] = {"server_hello": len(theirs), "status": status(verdict), "after": len(rest)}

# 3. Replays the server's own proof back as its answer (reflection).
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(hello(1, os.urandom(32)))
theirs = recv_exact(s, 88)
s.sendall(theirs[56:88])
out["reflected_proof"] = {"status": status(recv_exact(s, 8))}
print(json.dumps(out))
