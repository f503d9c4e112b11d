#!/usr/bin/env bash
# `make demo`: a real job on the embedded sandbox cluster. The last broker is decommissioned:
# snapshot -> plan -> estimate -> execute under a throttle -> watch to completion -> throttles gone,
# while real clients (`kreassign sandbox load`) produce and consume, so their latency shows
# before, during and after the move; the brokers' Prometheus metrics are scraped mid-move.
# `make demo ENGINE=kafka` runs the same job on real Apache Kafka brokers (fewer, with smaller
# topics: real bytes take real time), without the emulator's metrics endpoints.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=.kreassign/demo
WORK=$STATE/work
mkdir -p "$WORK"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
LOAD_PID=
cleanup() {
  if [ -n "$LOAD_PID" ]; then kill "$LOAD_PID" 2>/dev/null || true; fi
  kreassign sandbox stop --state-dir "$STATE/sandbox" >/dev/null 2>&1 || true
}
kreassign sandbox stop --state-dir "$STATE/sandbox" >/dev/null 2>&1 || true
trap cleanup EXIT

ENGINE=${ENGINE:-emulator}
if [ "$ENGINE" = kafka ]; then
  TOPICS=orders:12:3:4MB:20kB/s,payments:8:3:3MB:10kB/s,clickstream:16:3:4MB:40kB/s,inventory:6:2:2MB:5kB/s
  BROKERS=6; THROTTLE=4MB/s
  START=(--engine kafka --brokers 6 --racks 3)
else
  # Real time (--speed 1), so the rates watch measures are the rates the throttle allows.
  TOPICS=orders:12:3:40MB:200kB/s,payments:8:3:30MB:100kB/s,clickstream:16:3:40MB:400kB/s,inventory:6:2:20MB:50kB/s
  BROKERS=8; THROTTLE=20MB/s
  START=(--brokers 8 --racks 4 --speed 1 --metrics-port 0)
fi
printf '\033[1m$ kreassign sandbox start --daemon %s --topics %s\033[0m\n' "${START[*]}" "$TOPICS"
BOOTSTRAP=$(kreassign sandbox start --daemon --fresh "${START[@]}" --seed 42 --topics "$TOPICS" \
            --state-dir "$STATE/sandbox")
echo "$BOOTSTRAP"
export KREASSIGN_BOOTSTRAP_SERVER=$BOOTSTRAP

# Real clients for the whole job: their log is shown in three parts at the end.
LOAD_LOG=$WORK/load.log
: > "$LOAD_LOG"
printf '\n\033[1m$ kreassign sandbox load --topic orders:100kB/s --topic payments:50kB/s --interval 2s &\033[0m\n'
kreassign sandbox load --bootstrap-server "$BOOTSTRAP" --topic orders:100kB/s --topic payments:50kB/s \
    --interval 2s --duration 3600s >> "$LOAD_LOG" 2>&1 &
LOAD_PID=$!

# let the consumer group form (its offsets topic, __consumer_offsets, is then part of the
# snapshot and of the plan) and a few "before" intervals pass
sleep 8
step kreassign snapshot --bootstrap-server "$BOOTSTRAP" --output-file "$WORK/before.json"
step kreassign decommission --snapshot "$WORK/before.json" --brokers "$BROKERS" \
     --write-plan "$WORK/plan.json"
step kreassign plan --snapshot "$WORK/before.json" --reassignment-json-file "$WORK/plan.json" \
     --throttle "$THROTTLE"
step kreassign estimate --snapshot "$WORK/before.json" --reassignment-json-file "$WORK/plan.json" \
     --throttle "$THROTTLE"
echo "--- the move starts ---" >> "$LOAD_LOG"
step kreassign execute --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --throttle "$THROTTLE" --journal-dir "$STATE/journal"
if [ "$ENGINE" != kafka ]; then
printf '\n\033[1mBroker 1 /metrics mid-move (under-replicated partitions, replication bytes, Produce latency):\033[0m\n'
python - "$STATE/sandbox/sandbox.json" <<'PY'
import json, sys, urllib.request
url = json.load(open(sys.argv[1]))["extra"]["metrics"]["1"]
wanted = ("kafka_server_replicamanager_underreplicatedpartitions ",
          "kafka_server_brokertopicmetrics_replicationbytesout_total ",
          'kafka_network_requestmetrics_totaltimems{quantile="0.99",request="Produce"}',
          'kafka_network_requestmetrics_remotetimems{quantile="0.99",request="Produce"}',
          'kafka_server_brokertopicmetrics_bytesin_total{topic="orders"}')
for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
    if line.startswith(wanted):
        print(line)
PY
fi
step kreassign watch --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --interval 2 --journal-dir "$STATE/journal"
echo "--- the move is done ---" >> "$LOAD_LOG"
step kreassign verify --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --journal-dir "$STATE/journal"
step kreassign throttle show --bootstrap-server "$BOOTSTRAP"
step kreassign --bootstrap-server "$BOOTSTRAP" --list
step kreassign snapshot --bootstrap-server "$BOOTSTRAP" --output-file "$WORK/after.json"
step kreassign plan --snapshot "$WORK/after.json" --reassignment-json-file "$WORK/plan.json"
sleep 6  # a few "after" intervals
kill -TERM "$LOAD_PID" && wait "$LOAD_PID" || true
LOAD_PID=

printf '\n\033[1mClients (kreassign sandbox load) before, during and after the move:\033[0m\n'
head -n 1 "$LOAD_LOG"
printf '\033[1mbefore\033[0m\n'
sed -n '2,/^--- the move starts ---$/p' "$LOAD_LOG" | grep -v '^---' | tail -n 4
printf '\033[1mduring\033[0m\n'
sed -n '/^--- the move starts ---$/,/^--- the move is done ---$/p' "$LOAD_LOG" | grep -v '^---'
printf '\033[1mafter\033[0m\n'
sed -n '/^--- the move is done ---$/,$p' "$LOAD_LOG" | grep -v '^---'
