#!/bin/sh
# The whole system over RDMA, inside the soft-RoCE VM (`./dev rdma-test` runs it):
#   cargo build -p imca --features rdma
#   scripts/rdma-vm/run-in-rdma-vm.sh transport/tests/rdma_system.sh target/debug/imca
# 1. `imca up --transport rdma`: storage servers and cache nodes listen via
#    rdma_cm on RDMA_IP; the gateway reaches both over RDMA, and so do the
#    storage servers' banks. Scripted file ops through the FUSE mount must
#    pass; the gateway's and storage servers' bank connections must all be
#    RDMA (imca_bank_connections_total), and repeated stats/reads must be
#    bank hits (imca_bank_requests_total{op="get",result="hit"} grows) once
#    the kernel's caches are dropped (it answers them itself otherwise); the
#    gateway's kernel-cache polls travel over RDMA too (imca_storage_ops_total
#    {op="poll"} grows on the storage servers).
# 2. The same ops on a fresh `imca up --transport tcp` in the same VM run:
#    the resulting trees (listing, sizes, link targets, sha256 of every
#    file) must be identical.
# Exit status 0 = pass. The exports need user xattrs, which the VM's /tmp
# lacks, so they live on an ext4 image on a loop device.
set -u
B=${1:?usage: rdma_system.sh PATH/TO/imca}
[ -n "${RDMA_IP:-}" ] || { echo "RDMA_IP unset: run inside scripts/rdma-vm/run-in-rdma-vm.sh"; exit 2; }
export IMCA_RDMA_ACK_TIMEOUT=19 IMCA_RDMA_RETRY_CNT=7 IMCA_RDMA_GID_INDEX=${RDMA_GID_INDEX:-1} IMCA_LOG=info
modprobe loop 2>/dev/null; modprobe fuse 2>/dev/null
W=$(mktemp -d); F=$W/fs; mkdir -p $F
truncate -s 600M $W/ext4.img && mkfs.ext4 -q -F $W/ext4.img && mount -o loop $W/ext4.img $F || { echo "FAIL: no ext4 loop mount"; exit 1; }
dd if=/dev/urandom of=$W/big bs=1M count=3 2>/dev/null
dd if=/dev/urandom of=$W/patch bs=4096 count=3 2>/dev/null
UP=
fail() {
    echo "FAIL: $*"
    for l in $W/up-*.log; do echo "== $l"; cat $l; done
    [ -z "$UP" ] || { kill $UP 2>/dev/null; wait $UP 2>/dev/null; }
    exit 1
}

# up KIND: start a cluster on its own data dir; sets D (data), M (mount), UP (pid)
up() {
    D=$F/$1; M=$W/mnt-$1; mkdir -p $D
    "$B" up --dir $D --mount $M --transport $1 --rdma-ip "$RDMA_IP" --start-timeout 120 >$W/up-$1.log 2>&1 &
    UP=$!
    i=0; while [ ! -f $D/cluster.json ] && kill -0 $UP 2>/dev/null && [ $i -lt 1800 ]; do sleep 0.1; i=$((i+1)); done
    [ -f $D/cluster.json ] || fail "imca up --transport $1 did not come up"
    # A bank round trip takes milliseconds on the emulated CPU, over either
    # transport: the default 5 ms timeout would turn most reads into misses.
    "$B" ctl --cluster $D/cluster.json timeout 2000 >/dev/null || fail "imca ctl timeout 2000"
}
down() {
    kill $UP; wait $UP || fail "imca up did not stop cleanly"; UP=
}

# metric URL REGEX: the sum of the samples whose line matches REGEX
metric() {
    curl -sf "$1" | awk -v re="$2" '!/^#/ && $0 ~ re { s += $NF } END { printf "%d\n", s }'
}
# every bank metric endpoint of the cluster (gateway and storage servers; cache nodes report 0)
bank_metric() {
    s=0
    for u in $(jq -r '.metrics[]' $D/cluster.json); do s=$((s + $(metric "$u" "$1"))); done
    echo $s
}
gateway_metrics() { jq -r '.metrics[-1]' $D/cluster.json; }
HIT='^imca_bank_requests_total[{].*op="get".*result="hit"'

# ops: the scripted file operations, checked as they go; the tree's digest to $1
ops() {
    echo hello > $M/a && [ "$(cat $M/a)" = hello ] || fail "small write/read"
    cp $W/big $M/big && cmp $W/big $M/big || fail "3 MiB write/read"
    cmp $W/big $M/big || fail "3 MiB re-read"
    dd if=$W/patch of=$M/big bs=4096 seek=100 count=3 conv=notrunc 2>/dev/null
    cp $W/big $W/expect
    dd if=$W/patch of=$W/expect bs=4096 seek=100 count=3 conv=notrunc 2>/dev/null
    cmp $W/expect $M/big || fail "overwrite in the middle"
    mkdir $M/d && mv $M/a $M/d/b && [ "$(cat $M/d/b)" = hello ] || fail "mkdir/rename"
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        head -c $((i * 1777)) $W/big > $M/d/f$i || fail "write d/f$i"
    done
    printf 'more\n' >> $M/d/f3 && mv $M/d/f4 $M/d/f5 && rm $M/d/f6 || fail "append/rename over/unlink"
    ln -s d/b $M/sym && [ "$(readlink $M/sym)" = d/b ] && [ "$(cat $M/sym)" = hello ] || fail "symlink"
    cp $M/big $M/big2 && truncate -s 5000 $M/big && [ "$(stat -c %s $M/big)" = 5000 ] || fail "truncate"
    truncate -s 200000 $M/big2 && head -c 200000 $W/expect | cmp - $M/big2 || fail "truncate to 200000"
    truncate -s 300000 $M/big2 && [ "$(stat -c %s $M/big2)" = 300000 ] || fail "extend"
    mkdir $M/gone && rmdir $M/gone && [ ! -e $M/gone ] || fail "rmdir"
    rm $M/big && [ ! -e $M/big ] || fail "unlink"
    (cd $M && find . | sort && find . -type f -printf '%p %s\n' | sort && find . -type l -printf '%p -> %l\n' \
        && find . -type f | sort | xargs sha256sum) > $1 || fail "digest of the tree"
}

# 1. over RDMA
up rdma
ops $W/tree-rdma
G=$(gateway_metrics)
h0=$(metric $G "$HIT")
for i in 1 2 3 4 5; do
    echo 3 > /proc/sys/vm/drop_caches   # the kernel forgets: the gateway must ask
    stat $M/d/b $M/d/f1 $M/big2 >/dev/null; cat $M/d/f7 $M/big2 >/dev/null
done
h1=$(metric $G "$HIT")
polls=$(bank_metric '^imca_storage_ops_total[{].*op="poll".*result="ok"')
[ "$polls" -gt 0 ] || fail "no kernel-cache polls reached the storage servers over RDMA"
[ "$h1" -gt "$h0" ] || { curl -s $G | grep '^imca_bank'; grep -i 'rdma\|bank\|cache' $D/logs/gateway.log | tail -20; fail "no bank hits on repeated stat/read over RDMA (hits $h0 -> $h1)"; }
rdma_conns=$(bank_metric '^imca_bank_connections_total[{].*transport="rdma"')
tcp_conns=$(bank_metric '^imca_bank_connections_total[{].*transport="tcp"')
[ "$rdma_conns" -ge 3 ] && [ "$tcp_conns" -eq 0 ] \
    || fail "bank connections: $rdma_conns over RDMA, $tcp_conns over TCP (want gateway and storage servers over RDMA only)"
n=$(grep -c "RDMA connection established" $D/logs/gateway.log)
[ "$n" -ge 4 ] || fail "gateway log shows $n RDMA connections, expected 2 storage servers + 2 cache nodes"
grep -q "cache node listening for RDMA" $D/logs/cache-0.log || fail "cache-0 does not serve RDMA"
down
echo "PASS: imca up --transport rdma: file ops pass; bank hits $h0 -> $h1 on repeated stat/read; $polls kernel-cache polls; $rdma_conns bank connections over RDMA, 0 over TCP; $n RDMA connections from the gateway"

# 2. the same ops over TCP, same VM run: identical results
up tcp
ops $W/tree-tcp
G=$(gateway_metrics)
t0=$(metric $G "$HIT")
for i in 1 2 3 4 5; do
    echo 3 > /proc/sys/vm/drop_caches
    stat $M/d/b $M/d/f1 $M/big2 >/dev/null; cat $M/d/f7 $M/big2 >/dev/null
done
t1=$(metric $G "$HIT")
[ "$(bank_metric '^imca_bank_connections_total[{].*transport="rdma"')" -eq 0 ] || fail "TCP cluster used RDMA"
down
diff $W/tree-rdma $W/tree-tcp || fail "the trees differ between --transport rdma and --transport tcp"
echo "PASS: imca up --transport tcp: same ops give an identical tree ($(wc -l < $W/tree-tcp) lines: listing, sizes, links, sha256); bank hits $t0 -> $t1"
