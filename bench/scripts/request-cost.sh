#!/usr/bin/env bash
# Where a bank-served request's time goes (docs/benchmarks/archive/issue-12-kernel-caching.md, issue 12 part 6): perf stat and
# perf record of the gateway while one process stats files answered from the bank
# (kernel cache off: every stat reaches the gateway; 2 cache nodes).
# usage (root, linux-perf): cargo build --release -p imca; bench/scripts/request-cost.sh target/release/imca
#        UP_ARGS=--no-cache: the same with no cache nodes (every request goes to the storage servers)
#        then: perf report -i /var/tmp/perf.data --no-children --sort dso,symbol
set -euo pipefail
BIN=$1; W=/var/tmp/pstat; rm -rf $W; mkdir -p $W
$BIN up --dir $W/c --mount $W/m --kernel-cache off ${UP_ARGS:-} > $W/up.log 2>&1 & UP=$!
trap 'kill -INT $UP; wait $UP' EXIT
for i in $(seq 300); do [ -f $W/c/cluster.json ] && break; sleep 0.1; done
python3 -c "
import os
d='$W/m/p'; os.makedirs(d)
for i in range(500): open(f'{d}/f{i:04d}','wb').write(b'x'*1024)
for i in range(500): os.stat(f'{d}/f{i:04d}')
"
GW=$(pgrep -f " mount .*$W/m" | head -1)
echo "gateway pid $GW"
python3 - <<PY &
import os, time
d='$W/m/p'
t=time.perf_counter(); n=0
while time.perf_counter()-t < 5:
    for i in range(500): os.stat(f'{d}/f{i:04d}'); n+=1
print("stats", n, "per s", round(n/(time.perf_counter()-t)))
open('$W/n','w').write(str(n))
PY
PY=$!
sleep 0.5
perf stat -e task-clock,context-switches,cpu-migrations -p $GW -- sleep 2 2>&1 | tail -9; perf record -F 2000 ${CALLGRAPH:--g} -o /var/tmp/perf.data -p $GW -- sleep 2 2>/dev/null >/dev/null
wait $PY
curl -s $(python3 -c "import json;c=json.load(open('$W/c/cluster.json'));print([u for u in c['metrics']][-1])") | grep -E 'imca_gateway_ops_total\{op="(lookup|getattr)"|imca_gateway_cache_total' | head
