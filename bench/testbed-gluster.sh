# bench/testbed-gluster.sh — GlusterFS volfiles for `bench/testbed --gluster` (sourced, not run).
#
# The testbed runs GlusterFS without glusterd: one `glusterfsd` brick per storage namespace
# and one `glusterfs` FUSE client in the gateway namespace, each started with `-f VOLFILE`.
# glusterd would only have written these volfiles and spawned the same processes; without it
# there is no management daemon per namespace, no port mapper and no peer pool to clean up.
#
# The graphs are what glusterd of Debian 12's GlusterFS 10.3 generates for
#     gluster volume create gv transport tcp H:/b1 H:/b2 force      (distribute, 2 bricks)
# (read off /var/lib/glusterd/vols/gv/*.vol of a scratch glusterd on this machine,
# 2026-11-27), with these differences, each needed to run without glusterd or to measure
# like for like:
#   - client: `filter-O_DIRECT enable` on every protocol/client — what
#     `gluster volume set gv network.remote-dio enable` writes. Without it the bricks open
#     files with O_DIRECT on ext4, which refuses unaligned I/O (EINVAL), so the suite's
#     latency benchmarks (B2/B3/B5) could not use O_DIRECT on GlusterFS and would read the
#     client's page cache instead. With it, O_DIRECT bypasses the client's caches and the
#     brick reads through its page cache, as IMCa's storage servers do.
#   - brick: no `volume-id` (posix would want the trusted.glusterfs.volume-id xattr glusterd
#     sets), no auth.login username/password (auth by address only: the testbed's subnet),
#     `shared-brick-count 1` (each brick has a disk of its own), a fixed listen port bound
#     to the server namespace's address (glusterd's port mapper would pick one).
# Everything else — translators, their order and options, the Debian defaults of the
# client's performance translators (write-behind, open-behind, quick-read, md-cache with
# its 1 s timeout, client io-threads; read-ahead, io-cache, readdir-ahead and nl-cache off)
# — is as glusterd writes it.

GLUSTER_VOL=gv
GLUSTER_PORT=24009

# gluster_brick_vol BRICK_DIR ADDR ALLOW WORKDIR: the server graph of one brick, on stdout
gluster_brick_vol() {
    local b=$1 addr=$2 allow=$3 wd=$4 v=$GLUSTER_VOL
    cat <<EOF
volume $v-posix
    type storage/posix
    option shared-brick-count 1
    option fips-mode-rchecksum on
    option directory $b
end-volume

volume $v-trash
    type features/trash
    option trash-internal-op off
    option brick-path $b
    option trash-dir .trashcan
    subvolumes $v-posix
end-volume

volume $v-changelog
    type features/changelog
    option changelog-barrier-timeout 120
    option changelog-notification off
    option changelog-dir $b/.glusterfs/changelogs
    option changelog-brick $b
    subvolumes $v-trash
end-volume

volume $v-bitrot-stub
    type features/bitrot-stub
    option bitrot disable
    option export $b
    subvolumes $v-changelog
end-volume

volume $v-access-control
    type features/access-control
    subvolumes $v-bitrot-stub
end-volume

volume $v-locks
    type features/locks
    option enforce-mandatory-lock off
    subvolumes $v-access-control
end-volume

volume $v-worm
    type features/worm
    option worm-files-deletable on
    option worm-file-level off
    option worm off
    subvolumes $v-locks
end-volume

volume $v-read-only
    type features/read-only
    option read-only off
    subvolumes $v-worm
end-volume

volume $v-leases
    type features/leases
    option leases off
    subvolumes $v-read-only
end-volume

volume $v-upcall
    type features/upcall
    option cache-invalidation off
    subvolumes $v-leases
end-volume

volume $v-io-threads
    type performance/io-threads
    subvolumes $v-upcall
end-volume

volume $v-selinux
    type features/selinux
    option selinux on
    subvolumes $v-io-threads
end-volume

volume $v-marker
    type features/marker
    option inode-quota off
    option quota off
    option gsync-force-xtime off
    option xtime off
    option quota-version 0
    option timestamp-file $wd/marker.tstamp
    subvolumes $v-selinux
end-volume

volume $v-barrier
    type features/barrier
    option barrier-timeout 120
    option barrier disable
    subvolumes $v-marker
end-volume

volume $v-index
    type features/index
    option xattrop-pending-watchlist trusted.afr.$v-
    option xattrop-dirty-watchlist trusted.afr.dirty
    option index-base $b/.glusterfs/indices
    subvolumes $v-barrier
end-volume

volume $v-quota
    type features/quota
    option deem-statfs off
    option server-quota off
    option volume-uuid $v
    subvolumes $v-index
end-volume

volume $b
    type debug/io-stats
    option global-threading off
    option count-fop-hits off
    option latency-measurement off
    option threads 16
    option log-level INFO
    option unique-id $b
    subvolumes $v-quota
end-volume

volume $v-server
    type protocol/server
    option transport.listen-backlog 1024
    option transport.socket.keepalive-count 9
    option transport.socket.keepalive-interval 2
    option transport.socket.keepalive-time 20
    option transport.socket.ssl-enabled off
    option transport.socket.keepalive 1
    option auth.addr.$b.allow $allow
    option auth-path $b
    option transport.address-family inet
    option transport-type tcp
    option transport.socket.bind-address $addr
    option transport.socket.listen-port $GLUSTER_PORT
    subvolumes $b
end-volume
EOF
}

# gluster_client_vol PERF ADDR=BRICK_DIR...: the FUSE client's graph over every brick, on stdout.
# PERF "default": Debian's defaults; "off": without md-cache and quick-read (what
# `gluster volume set gv performance.stat-prefetch off; … performance.quick-read off` leaves),
# so every stat and read reaches a brick, as in IMCa without the bank.
gluster_client_vol() {
    local v=$GLUSTER_VOL i=0 subs="" a perf=$1
    shift
    for a in "$@"; do
        cat <<EOF
volume $v-client-$i
    type protocol/client
    option send-gids true
    option strict-locks off
    option transport.socket.keepalive-count 9
    option transport.socket.keepalive-interval 2
    option transport.socket.keepalive-time 20
    option transport.tcp-user-timeout 0
    option filter-O_DIRECT enable
    option transport.socket.ssl-enabled off
    option transport.address-family inet
    option transport-type tcp
    option remote-subvolume ${a#*=}
    option remote-host ${a%%=*}
    option remote-port $GLUSTER_PORT
    option ping-timeout 42
end-volume

EOF
        subs+="${subs:+ }$v-client-$i"
        i=$((i + 1))
    done
    cat <<EOF
volume $v-dht
    type cluster/distribute
    option force-migration off
    option lock-migration off
    subvolumes $subs
end-volume

volume $v-utime
    type features/utime
    option noatime on
    subvolumes $v-dht
end-volume

volume $v-write-behind
    type performance/write-behind
    subvolumes $v-utime
end-volume

volume $v-open-behind
    type performance/open-behind
    subvolumes $v-write-behind
end-volume

EOF
    local below=$v-open-behind
    if [ "$perf" = default ]; then
        cat <<EOF
volume $v-quick-read
    type performance/quick-read
    subvolumes $v-open-behind
end-volume

volume $v-md-cache
    type performance/md-cache
    subvolumes $v-quick-read
end-volume

EOF
        below=$v-md-cache
    fi
    cat <<EOF
volume $v-io-threads
    type performance/io-threads
    subvolumes $below
end-volume

volume $v
    type debug/io-stats
    option global-threading off
    option count-fop-hits off
    option latency-measurement off
    option threads 16
    option log-level INFO
    subvolumes $v-io-threads
end-volume
EOF
}
