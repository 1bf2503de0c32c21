#!/usr/bin/env bash
# The first stat pass through the same client (issue 12's "stat/s, first pass"), bindfs
# against `imca up --no-cache` (kernel cache on), alternated 5 times in one run: 2,000
# files of 1 KiB made through the mount, 2 s for every TTL to run out, then one `stat`
# of each; prints each pass's rate and the ratio of the medians. Both pay one FUSE
# crossing per file here (bindfs: its entry expired; IMCa: its lease ran out, and the
# kernel dropped the attributes after the write), so this is the crossing's cost.
# usage (root; bindfs): cargo build --release -p imca; bench/scripts/first-pass.sh target/release/imca
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}"); W=$(mktemp -d /var/tmp/fpab.XXXX)
mkdir -p $W/local $W/bindfs
bindfs $W/local $W/bindfs
$BIN up --no-cache --dir $W/c --mount $W/m > $W/up.log 2>&1 & UP=$!
trap 'kill -INT $UP; wait $UP || true; fusermount3 -u -z $W/bindfs; rm -rf $W' EXIT
for i in $(seq 300); do [ -f $W/c/cluster.json ] && break; sleep 0.1; done
python3 - $W/bindfs $W/m <<'PY'
import os, sys, time
def setup(d, tag):
    files=[os.path.join(d, tag, f"f{i:05d}") for i in range(2000)]
    os.makedirs(os.path.join(d, tag))
    for f in files: open(f,"wb").write(os.urandom(1024))
    return files
def first(files):
    time.sleep(2)
    t=time.perf_counter()
    for f in files: os.stat(f)
    return round(len(files)/(time.perf_counter()-t))
res={"bindfs":[], "imca":[]}
for r in range(5):
    for name, d in (("bindfs", sys.argv[1]), ("imca", sys.argv[2])):
        res[name].append(first(setup(d, f"r{r}")))
med=lambda xs: sorted(xs)[len(xs)//2]
print(res, "median ratio imca/bindfs", round(med(res["imca"])/med(res["bindfs"]),2))
PY
