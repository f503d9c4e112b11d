#!/usr/bin/env bash
# `make demo`: a real job on the embedded sandbox cluster. Broker 8 is decommissioned:
# snapshot -> plan -> estimate -> execute under a throttle -> watch to completion -> throttles gone.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=.kreassign/demo
WORK=$STATE/work
mkdir -p "$WORK"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

kreassign sandbox stop --state-dir "$STATE/sandbox" >/dev/null 2>&1 || true
trap 'kreassign sandbox stop --state-dir "$STATE/sandbox" >/dev/null 2>&1 || true' EXIT

# Real time (--speed 1), so the rates watch measures are the rates the throttle allows.
TOPICS=orders:12:3:40MB:200kB/s,payments:8:3:30MB:100kB/s,clickstream:16:3:40MB:400kB/s,inventory:6:2:20MB:50kB/s
printf '\033[1m$ kreassign sandbox start --daemon --brokers 8 --racks 4 --speed 1 --topics %s\033[0m\n' "$TOPICS"
BOOTSTRAP=$(kreassign sandbox start --daemon --fresh --brokers 8 --racks 4 --speed 1 --seed 42 \
            --topics "$TOPICS" --state-dir "$STATE/sandbox")
echo "$BOOTSTRAP"
export KREASSIGN_BOOTSTRAP_SERVER=$BOOTSTRAP

step kreassign snapshot --bootstrap-server "$BOOTSTRAP" --output-file "$WORK/before.json"
step kreassign decommission --snapshot "$WORK/before.json" --brokers 8 \
     --write-plan "$WORK/plan.json"
step kreassign plan --snapshot "$WORK/before.json" --reassignment-json-file "$WORK/plan.json" \
     --throttle 20MB/s
step kreassign estimate --snapshot "$WORK/before.json" --reassignment-json-file "$WORK/plan.json" \
     --throttle 20MB/s
step kreassign execute --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --throttle 20MB/s --journal-dir "$STATE/journal"
step kreassign watch --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --interval 2 --journal-dir "$STATE/journal"
step kreassign verify --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/plan.json" \
     --journal-dir "$STATE/journal"
step kreassign throttle show --bootstrap-server "$BOOTSTRAP"
step kreassign --bootstrap-server "$BOOTSTRAP" --list
step kreassign snapshot --bootstrap-server "$BOOTSTRAP" --output-file "$WORK/after.json"
step kreassign plan --snapshot "$WORK/after.json" --reassignment-json-file "$WORK/plan.json"
