#!/bin/sh
# RDMA vs TCP through the RpcClient boundary and through the cache bank, and perftest's ib_send_lat / ib_write_lat /
# ib_write_bw as the limit, in one soft-RoCE VM run (docs/benchmarks.md "RDMA vs TCP"):
#   T=$(cargo test --release -p transport --features rdma --test rdma --no-run 2>&1 | sed -n 's/.*(\(.*\))/\1/p')
#   scripts/rdma-vm/run-in-rdma-vm.sh transport/tests/rdma_bench.sh $T
T=${1:?usage: rdma_bench.sh PATH/TO/rdma-test-binary}
$T --ignored bench_rdma_vs_tcp --nocapture --test-threads 1 2>&1 | grep "bench:"
# cache get latency through cache_bank::Bank against a cache node, RDMA vs TCP
$T --ignored bench_bank_get_rdma_vs_tcp --nocapture --test-threads 1 2>&1 | grep "bench:"
ib_send_lat -x $RDMA_GID_INDEX -u 20 -s 64 -n 500 >/tmp/slat.srv 2>&1 & sleep 2; ib_send_lat -x $RDMA_GID_INDEX -u 20 -s 64 -n 500 $RDMA_IP 2>&1 | grep -A2 "#bytes" | tail -3
sleep 1
ib_write_lat -x $RDMA_GID_INDEX -u 20 -s 4096 -n 500 >/tmp/lat.srv 2>&1 & sleep 2; ib_write_lat -x $RDMA_GID_INDEX -u 20 -s 4096 -n 500 $RDMA_IP 2>&1 | grep -A2 "t_min\|#bytes" | tail -3
sleep 1
ib_write_bw -x $RDMA_GID_INDEX -u 20 -s 1048576 -n 200 >/tmp/bw.srv 2>&1 & sleep 2; ib_write_bw -x $RDMA_GID_INDEX -u 20 -s 1048576 -n 200 $RDMA_IP 2>&1 | grep -A2 "#bytes" | tail -3
