#!/usr/bin/env python3
# Generates ../grafana/imca-overview.json (the dashboard is data; this keeps its
# layout and queries readable and consistent). Run: python3 dashboards/tools/gen_overview.py
# then: cargo nextest run -p imca ops_prometheus
import json
R = "$__rate_interval"
DS = {"type": "prometheus", "uid": "${datasource}"}
panels = []
y = 0
def row(title):
    global y
    panels.append({"type": "row", "title": title, "collapsed": False, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": [], "id": len(panels)+1})
    y += 1
x = 0
def panel(title, exprs, unit="short", kind="timeseries", w=8, h=8, desc="", minmax=None):
    global x, y
    if x + w > 24:
        x = 0; y += h
    p = {
        "id": len(panels)+1, "type": kind, "title": title, "description": desc, "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "mean"]}, "tooltip": {"mode": "multi"}} if kind == "timeseries" else {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "colorMode": "value", "graphMode": "none"},
        "targets": [{"refId": chr(65+i), "datasource": DS, "expr": e, "legendFormat": l} for i, (e, l) in enumerate(exprs)],
    }
    if minmax:
        p["fieldConfig"]["defaults"]["min"], p["fieldConfig"]["defaults"]["max"] = minmax
    panels.append(p)
    x += w
def newrow(title):
    global x, y
    if x: y += 8
    x = 0
    row(title)

newrow("Cache effectiveness")
panel("Hit ratio per op (gateway)", [(f'sum by (op) (rate(imca_gateway_cache_total{{result="hit"}}[{R}])) / sum by (op) (rate(imca_gateway_cache_total{{result=~"hit|miss"}}[{R}]))', "{{op}}")], unit="percentunit", minmax=(0, 1), desc="Share of lookups, getattrs (stat) and reads answered by the bank (CMCache); bypassed operations (no cache in force) are not counted")
panel("Hit ratio per cache node", [(f'sum by (node) (rate(imca_bank_requests_total{{op="get",result="hit"}}[{R}])) / sum by (node) (rate(imca_bank_requests_total{{op="get",result=~"hit|miss"}}[{R}]))', "{{node}}")], unit="percentunit", minmax=(0, 1), desc="Key gets that hit, per node, as the bank clients see them")
panel("Read bytes: bank vs storage servers", [
    (f'sum (rate(imca_gateway_read_bytes_total{{source="bank"}}[{R}]))', "from the bank"),
    (f'sum (rate(imca_gateway_read_bytes_total{{source="storage"}}[{R}]))', "from storage servers"),
], unit="Bps", desc="Bytes the gateways returned to applications, by where they came from")

newrow("Gateway operations")
panel("Ops/s per op", [(f'sum by (op) (rate(imca_gateway_ops_total[{R}]))', "{{op}}")], unit="ops")
panel("p50 latency per op", [(f'histogram_quantile(0.5, sum by (le, op) (rate(imca_gateway_op_duration_seconds_bucket[{R}])))', "{{op}}")], unit="s")
panel("p99 latency per op", [(f'histogram_quantile(0.99, sum by (le, op) (rate(imca_gateway_op_duration_seconds_bucket[{R}])))', "{{op}}")], unit="s")
panel("Errors/s per op", [(f'sum by (op) (rate(imca_gateway_ops_total{{result!="ok"}}[{R}])) or sum by (op) (rate(imca_gateway_ops_total[{R}])) * 0', "{{op}}")], unit="ops", desc="Operations that returned an error to the application (0 when none)")
panel("Bank round trip p99 (per batch)", [(f'histogram_quantile(0.99, sum by (le, op) (rate(imca_bank_request_seconds_bucket[{R}])))', "{{op}}")], unit="s", desc="One pipelined batch to one node; compare with the bank timeout")

newrow("Cache bank")
panel("Memory used per node", [("imca_cache_node_bytes", "{{instance}} used"), ("imca_cache_node_limit_bytes", "{{instance}} limit")], unit="bytes")
panel("Items per node", [("imca_cache_node_items", "{{instance}}")])
panel("Evictions/s per node", [(f'rate(imca_cache_node_evictions_total[{R}])', "{{instance}}")], unit="ops", desc="Non-zero means the bank is too small for the working set")
panel("Cache node requests/s", [(f'sum by (instance, op) (rate(imca_cache_node_ops_total[{R}]))', "{{instance}} {{op}}")], unit="ops")
panel("Bank requests/s by result (gateways and servers)", [(f'sum by (op, result) (rate(imca_bank_requests_total[{R}]))', "{{op}} {{result}}")], unit="ops", desc="timeout/down/error results are misses that cost a timeout")

newrow("Storage servers")
panel("Storage ops/s per server", [(f'sum by (instance) (rate(imca_storage_ops_total[{R}]))', "{{instance}}")], unit="ops", desc="Load the bank takes off the servers shows here")
panel("Storage ops/s per op", [(f'sum by (op) (rate(imca_storage_ops_total[{R}]))', "{{op}}")], unit="ops")
panel("SMCache bank work/s (servers)", [(f'sum by (op, result) (rate(imca_storage_cache_ops_total[{R}]))', "{{op}} {{result}}")], unit="ops", desc="populate after reads, update after writes, invalidate after mutations; result=error means a mutation was answered EIO because the bank could not confirm in time")
panel("Storage p99 latency per op", [(f'histogram_quantile(0.99, sum by (le, op) (rate(imca_storage_op_duration_seconds_bucket[{R}])))', "{{op}}")], unit="s")

newrow("Configuration")
panel("Block size", [("max(imca_gateway_config_block_size_bytes)", "block size")], unit="bytes", kind="stat", w=6, h=5)
panel("Config epoch (gateways)", [("max(imca_gateway_config_epoch)", "epoch")], kind="stat", w=6, h=5, desc="Bumped by every change made through the admin API")
panel("Gateways holding a valid lease", [("sum(imca_gateway_config_lease_valid)", "valid")], kind="stat", w=6, h=5, desc="A gateway without a lease bypasses the cache (authority unreachable)")
panel("Epoch per gateway", [("imca_gateway_config_epoch", "{{instance}}")], kind="stat", w=6, h=5, desc="All equal once a change has propagated (within one lease)")

newrow("Kernel cache (leases and callbacks)")
panel("Answered by the gateway itself/s", [(f'sum by (op) (rate(imca_gateway_answered_here_total[{R}]))', "{{op}}")], unit="ops", desc="FUSE requests answered from what the gateway remembers under its lease, with no network round trip (the kernel answers most repeats itself and never asks)")
panel("Callbacks/s by outcome (servers)", [(f'sum by (outcome) (rate(imca_storage_callbacks_total[{R}])) or vector(0)', "{{outcome}}")], unit="ops", desc="acked: a gateway holding what a mutation changed acknowledged before the reply; expired: it did not answer within its lease (frozen, partitioned); not_held: queued for a gateway that holds none of it, nobody waited (0 with one gateway)")
panel("Inodes held per server (leases)", [("imca_storage_kernel_cache_holds", "{{instance}}"), ("imca_storage_kernel_cache_sessions", "{{instance}} sessions")], desc="Inodes gateways told each server their kernels may cache; a mutation waits only for the gateways that hold what it changes. A gateway past 2^20 is waited for on every change")

newrow("Faults and recovery")
panel("Storage servers up (gateways)", [("min by (server) (imca_gateway_storage_server_up)", "{{server}}")], minmax=(0, 1), desc="0: a gateway marked the server down after it missed a deadline; its calls fail at once (EIO) until a probe finds it back")
panel("Bank bypassed (gateways)", [("imca_gateway_bank_bypassed", "{{instance}}"), (f"sum (increase(imca_gateway_bank_bypassed_seconds_total[{R}]))", "seconds bypassed")], desc="1 while a gateway's config lease ran out and it serves without the bank; seconds are added as each episode ends")
panel("Heals pending, writes failed part-way", [("sum (imca_gateway_heals_pending)", "names to heal"), ("sum (imca_gateway_writes_failed_partway_total)", "writes failed part-way"), ("max (imca_gateway_heal_sweep_needed)", "full sweep waiting")], desc="Names an operation left different between servers, healed in the background once they answer; writes that returned EIO after some stripe units were written (the gateway log names each file)")
panel("Locks: grace and losses", [("max (imca_storage_lock_grace)", "servers in a lock grace"), ("sum (imca_gateway_locks_lost_total)", "locks lost (holders told EIO)")], desc="After a restart a server grants no new lock while gateways reclaim theirs; a lock that could not be reclaimed is reported to its holder")
panel("Cache nodes without a login", [("max by (node) (imca_bank_node_open) or vector(0)", "{{node}}")], minmax=(0, 1), desc="1: the node served a request made without a login (anyone may write it); the volume's daemons use it only with --cache-allow-open-nodes")
panel("Connections refused or shed (cache nodes)", [(f"sum by (reason) (rate(imca_cache_node_connections_rejected_total[{R}])) or vector(0)", "{{reason}}")], unit="ops", desc="conn_limit, peer_limit (one local user or host over its share), login_shed and login_timeout (connections that never logged in)")

dash = {
    "uid": "imca-overview", "title": "IMCa overview", "tags": ["imca"], "timezone": "browser", "schemaVersion": 39, "version": 1,
    "editable": True, "refresh": "10s", "time": {"from": "now-30m", "to": "now"},
    "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus", "current": {}, "hide": 0}]},
    "annotations": {"list": []},
    "description": "IMCa: hit ratios, gateway latency, bank memory, storage load, live config. Queries use metric names only, so any job naming works.",
    "panels": panels,
}
import os
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grafana", "imca-overview.json")
json.dump(dash, open(out, "w"), indent=2)
print(len([p for p in panels if p["type"] != "row"]), "panels")
