#!/usr/bin/env bash
# The demo behind `make demo`: start the daemon on a fresh temp dir, stream
# testdata/ in through NATS as a controller would, ask the planner, stop.
set -euo pipefail
bin=${1:-bin/ctxgraph}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ctxgraph-demo.XXXXXX")
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
nats_port=$(port); http_port=$(port)
nats="nats://127.0.0.1:$nats_port"; http="http://127.0.0.1:$http_port"

echo "==> starting ctxgraph serve (data $dir, NATS $nats, HTTP $http)"
"$bin" serve --data "$dir" --nats-addr "127.0.0.1:$nats_port" --http-addr "127.0.0.1:$http_port" --log-level warn &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -fsS "$http/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$http/readyz" >/dev/null

echo "==> streaming testdata/episodes.jsonl as robot controllers, and testdata/spans.jsonl as a CMS writer"
"$bin" replay --nats "$nats" --quiet --retime --wait 30s testdata/episodes.jsonl
"$bin" import spans --nats "$nats" --quiet --wait 30s testdata/spans.jsonl

echo "==> store:"
"$bin" stats --http "$http"
echo
echo "==> asking the planner: where did the red block go, and which tool grasped it?"
"$bin" context --nats "$nats" --query "where is the red block and what grasped it" --goal "pick up the red block and put it in the blue bowl" --tool "parallel gripper" --entity "green cup" --hops 2 --k 8 --budget 40

echo
echo "==> shutting down"
kill -TERM "$pid"
wait "$pid"
trap - EXIT
rm -rf "$dir"
echo "==> done"
