#!/usr/bin/env bash
# B1–B5 on the testbed (issue 15, part 4): for each disk speed, one `bench/testbed`
# (2 storage servers on throttled loop disks, 4 cache nodes, the gateway; each in its own
# network namespace) and ONE `imca bench suite --cold` run against it as four targets:
# 4, 2, 1 and 0 cache nodes (nodes are removed with `imca ctl cache-nodes rm` between
# targets), then GlusterFS on the same testbed (`bench/testbed --gluster`: a brick in each
# storage server's namespace on a disk of its own with the same bounds, the client in the
# gateway's namespace) as a fifth target, `glusterfs`; every ratio against the 0-node target
# of the same run. Writes, per speed, OUT/<speed>/report.md with figures and the
# dissertation's numbers beside ours.
#
# `--cold` drops the kernel's caches before every timed phase, for every target alike: the
# page cache of every server's disk (IMCa's and the bricks') and the FUSE client's. What
# lives in a daemon's memory stays: IMCa's bank (the point of it) and GlusterFS's
# client-side caches (md-cache, quick-read; 1 s timeouts by default).
#
# usage (root): cargo build --release -p imca
#               bench/scripts/testbed-suite.sh [target/release/imca] [OUT]
# knobs: KERNEL_CACHE ("off": every request reaches the gateway, as in the dissertation's
#        design, so the bank is what is measured; "on", the default of `imca mount`, or both),
#        SPEEDS ("slow=200:50M fast=2000:400M": NAME=IOPS:BYTES/s read bound per disk),
#        SUITE_ARGS (default "--quick"; e.g. "--files 16384 --records 512"),
#        ONLY (e.g. "b1,b2"), BLOCK (the bank's block size for the run, e.g. 2048; set
#        through the admin API before the first target), TESTBED_ARGS (more bench/testbed options, e.g. "--delay 100us"),
#        GLUSTER ("on", the default: the glusterfs target; "off": IMCa only),
#        GATEWAYS (1, the default; N: `bench/testbed --gateways N`, N gateways in namespaces of
#        their own, each with its own mount, and every target spans all N mounts, so client k
#        of B1/B3/B4/B5 works through gateway k mod N; a target starts once every gateway holds
#        the config its before= made; GlusterFS gets one client mount per gateway namespace)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/release/imca}")
OUT=$(realpath -m "${2:-$ROOT/target/testbed-suite}")
SPEEDS=${SPEEDS:-"slow=200:50M fast=2000:400M"}
SUITE_ARGS=${SUITE_ARGS:---quick}
ONLY=${ONLY:-}
KERNEL_CACHE=${KERNEL_CACHE:-off}
BLOCK=${BLOCK:-}
TESTBED_ARGS=${TESTBED_ARGS:-}
GLUSTER=${GLUSTER:-on}
GATEWAYS=${GATEWAYS:-1}
[[ $GATEWAYS =~ ^[1-9][0-9]*$ ]] || { echo "GATEWAYS=N (1 or more)" >&2; exit 2; }
case $GLUSTER in on) TESTBED_ARGS="$TESTBED_ARGS --gluster" ;; off) ;; *) echo "GLUSTER=on|off" >&2; exit 2 ;; esac
DIR=/var/tmp/imca-testbed
NET=10.213.77
BED=""
stop_bed() {
    [ -n "$BED" ] || return 0
    kill -TERM "$BED" 2>/dev/null || true
    wait "$BED" 2>/dev/null || true
    BED=""
}
trap stop_bed EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT"
for kc in $KERNEL_CACHE; do
for speed in $SPEEDS; do
    name=${speed%%=*}-kc$kc${BLOCK:+-b$BLOCK}$([ "$GATEWAYS" = 1 ] || echo "-gw$GATEWAYS") bound=${speed#*=}
    iops=${bound%%:*} bps=${bound#*:}
    echo "== $name: disks $iops read IOPS, $bps/s per server; kernel cache $kc"
    rm -f "$DIR/testbed.json"
    # shellcheck disable=SC2086
    "$ROOT/bench/testbed" --imca "$BIN" --dir "$DIR" --storage 2 --cache 4 --iops "$iops" --bps "$bps" \
        --image-mb 1024 --cache-mb 256 --kernel-cache "$kc" --gateways "$GATEWAYS" $TESTBED_ARGS >"$OUT/$name.testbed.out" 2>&1 &
    BED=$!
    until [ -f "$DIR/testbed.json" ]; do
        kill -0 "$BED" 2>/dev/null || { cat "$OUT/$name.testbed.out" >&2; exit 1; }
        sleep 0.2
    done
    cat "$OUT/$name.testbed.out"
    # every gateway's mount, as one target's DIR1:DIR2:… (one mount: just MNT)
    MNT=$(python3 -c 'import json,sys; print(":".join(json.load(open(sys.argv[1]))["mounts"]))' "$DIR/testbed.json")
    GLUSTER_TARGET=()
    if [ "$GLUSTER" = on ]; then
        GMNT=$(python3 -c 'import json,sys; print(":".join(json.load(open(sys.argv[1]))["gluster"]["mounts"]))' "$DIR/testbed.json")
        GLUSTER_TARGET=(--target "glusterfs=$GMNT,block_size=none,placement=dht,transport=tcp (glusterfs)")
    fi
    ADMIN=http://127.0.0.1:9470
    CTL="$BIN ctl --admin $ADMIN --token-file $DIR/admin.token"
    # The cache config is the volume's (every storage server keeps it, server 0 the authority), so
    # a change through gateway 0 is every gateway's; each takes it up within its lease (1 s). With
    # more gateways, a target starts once every gateway holds the epoch the change made (the
    # suite runs in imcatb-g; gateway k's admin API is on imcatb-gK's loopback). No commas:
    # before= ends at one.
    epoch() { # epoch K WHAT: the `imca ctl WHAT --json` "epoch" of gateway K
        echo "\$($([ "$1" = 0 ] || echo "nsenter --net=/run/netns/imcatb-g$1 ")$CTL $2 --json |" \
            "python3 -c 'import json;import sys;print(json.load(sys.stdin)[\"epoch\"])')"
    }
    synced() { # a command that waits until every gateway holds server 0's epoch
        local cmd="e=$(epoch 0 config)" k
        for k in $(seq 0 $((GATEWAYS - 1))); do
            cmd+=" && n=0 && until [ \"$(epoch "$k" status)\" = \"\$e\" ]; do n=\$((n + 1)); [ \$n -lt 100 ] || exit 1; sleep 0.1; done"
        done
        echo "$cmd"
    }
    on_gws() { if [ "$GATEWAYS" = 1 ]; then echo "$CTL $* >/dev/null"; else echo "$CTL $* >/dev/null && $(synced)"; fi; }
    rm_nodes() { local cmd="" n; for n in "$@"; do cmd+="${cmd:+ && }$CTL cache-nodes rm $NET.$n:11211 >/dev/null"; done; on_gws_cmd "$cmd"; }
    on_gws_cmd() { if [ "$GATEWAYS" = 1 ]; then echo "$1"; else echo "$1 && $(synced)"; fi; }
    # shellcheck disable=SC2086
    nsenter --net=/run/netns/imcatb-g "$BIN" bench suite --cold $SUITE_ARGS ${ONLY:+--only $ONLY} --baseline n0 --out "$OUT/$name" \
        --target "n4=$MNT,admin=$ADMIN${BLOCK:+,before=$(on_gws block-size "$BLOCK")}" \
        --target "n2=$MNT,admin=$ADMIN,before=$(rm_nodes 63 62)" \
        --target "n1=$MNT,admin=$ADMIN,before=$(rm_nodes 61)" \
        --target "n0=$MNT,admin=$ADMIN,before=$(rm_nodes 60)" "${GLUSTER_TARGET[@]}" 2>&1 | tee "$OUT/$name.suite.log"
    cp "$DIR/testbed.json" "$OUT/$name/testbed.json"
    stop_bed
    echo "report: $OUT/$name/report.md"
done
done
