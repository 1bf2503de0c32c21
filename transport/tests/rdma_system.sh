#!/bin/sh
# The whole system over RDMA, inside the soft-RoCE VM:
#   cargo build -p imca --features rdma
#   scripts/rdma-vm/run-in-rdma-vm.sh transport/tests/rdma_system.sh target/debug/imca
# Starts `imca up --transport rdma` (storage servers listen via rdma_cm on RDMA_IP,
# the gateway connects over RDMA), then checks file operations through the
# FUSE mount and that the gateway's storage connections really are RDMA.
# Exit status 0 = pass. The exports need user xattrs, which the VM's /tmp
# lacks, so they live on an ext4 image on a loop device.
set -u
B=${1:?usage: rdma_system.sh PATH/TO/imca}
[ -n "${RDMA_IP:-}" ] || { echo "RDMA_IP unset: run inside scripts/rdma-vm/run-in-rdma-vm.sh"; exit 2; }
export IMCA_RDMA_ACK_TIMEOUT=19 IMCA_RDMA_RETRY_CNT=7 IMCA_RDMA_GID_INDEX=${RDMA_GID_INDEX:-1} IMCA_LOG=info
modprobe loop 2>/dev/null; modprobe fuse 2>/dev/null
W=$(mktemp -d); D=$W/data; M=$W/mnt; mkdir -p $D
truncate -s 300M $W/ext4.img && mkfs.ext4 -q -F $W/ext4.img && mount -o loop $W/ext4.img $D || { echo "FAIL: no ext4 loop mount"; exit 1; }
"$B" up --dir $D --mount $M --transport ${TRANSPORT:-rdma} --rdma-ip "$RDMA_IP" --start-timeout 120 >$W/up.log 2>&1 &
UP=$!
i=0; while [ ! -f $D/cluster.json ] && kill -0 $UP 2>/dev/null && [ $i -lt 1800 ]; do sleep 0.1; i=$((i+1)); done
fail() { echo "FAIL: $*"; cat $W/up.log; kill $UP 2>/dev/null; wait $UP 2>/dev/null; exit 1; }
[ -f $D/cluster.json ] || fail "imca up did not come up"
echo hello > $M/a && [ "$(cat $M/a)" = hello ] || fail "small write/read"
dd if=/dev/urandom of=$W/big bs=1M count=3 2>/dev/null
cp $W/big $M/big && cmp $W/big $M/big || fail "3 MiB write/read"
cmp $W/big $M/big || fail "3 MiB re-read (cache hits)"
dd if=$W/big of=$M/big bs=4096 seek=100 count=3 conv=notrunc 2>/dev/null
cp $W/big $W/expect
dd if=$W/big of=$W/expect bs=4096 seek=100 count=3 conv=notrunc 2>/dev/null
cmp $W/expect $M/big || fail "overwrite in the middle"
mkdir $M/d && mv $M/a $M/d/b && [ "$(cat $M/d/b)" = hello ] || fail "mkdir/rename"
truncate -s 5000 $M/big && [ "$(stat -c %s $M/big)" = 5000 ] || fail "truncate"
rm $M/big && [ ! -e $M/big ] || fail "unlink"
n=$(grep -c "RDMA connection established" $D/logs/gateway.log)
[ "${TRANSPORT:-rdma}" != rdma ] || [ "$n" -ge 2 ] || fail "gateway log shows $n RDMA connections, expected one per storage server"
kill $UP; wait $UP || fail "imca up did not stop cleanly"
echo "PASS: imca up --transport ${TRANSPORT:-rdma}: file ops through the mount pass ($n RDMA storage connections)"
