# Sourced by the benchmark scripts that start clusters of their own: the
# processes they start, waiting for readiness, and more gateways on one
# cluster's servers. The caller sets W (its work directory) and PIDS=().

# stop_all: every process started here gets SIGINT (a gateway unmounts), and
# is waited for.
stop_all() {
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}

# wait_file PATH [LOG]: until PATH exists (60 s), else show LOG's end and fail.
wait_file() {
    for _ in $(seq 600); do [ -f "$1" ] && return 0; sleep 0.1; done
    echo "never ready: $1" >&2
    [ -n "${2:-}" ] && tail -20 "$2" >&2
    exit 1
}

# start_up BIN DIR MOUNT [imca up flags...]: a whole cluster (`imca up`) keeping
# its data, logs and cluster.json in DIR, mounted at MOUNT; returns once
# DIR/cluster.json is written. Its log: DIR.log.
start_up() {
    local bin=$1 dir=$2 mount=$3; shift 3
    mkdir -p "$mount"
    "$bin" up --dir "$dir" --mount "$mount" "$@" >"$dir.log" 2>&1 &
    PIDS+=($!)
    wait_file "$dir/cluster.json" "$dir.log"
}

# add_gateway BIN DIR MOUNT: one more gateway (`imca mount`) on the storage
# servers and cache nodes of the cluster in DIR, mounted at MOUNT; returns
# once it is ready. Its pid: GATEWAY_PID; its log: MOUNT.log.
add_gateway() {
    local bin=$1 dir=$2 mount=$3 servers nodes
    servers=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["storage_servers"]))' "$dir/cluster.json")
    nodes=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1])).get("cache_nodes", [])))' "$dir/cluster.json")
    mkdir -p "$mount"
    "$bin" mount --storage-servers "$servers" --secret-file "$dir/volume.secret" \
        ${nodes:+--cache-nodes "$nodes"} --ready-file "$mount.ready" "$mount" >"$mount.log" 2>&1 &
    GATEWAY_PID=$!
    PIDS+=("$GATEWAY_PID")
    wait_file "$mount.ready" "$mount.log"
}
