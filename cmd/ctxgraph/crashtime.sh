#!/usr/bin/env bash
# crashtime.sh BIN DATA [REPLAY]: how long a start after a crash takes on
# a stopped daemon's data directory DATA. It starts the daemon, streams
# REPLAY (wire-format JSON lines, through `ctxgraph replay`) into it when
# given, kills it with SIGKILL 5 s later, then times a start, reads its
# RSS and what it caught up from the snapshots 25 s after, and stops it
# cleanly. `make crash-time DATA=DIR [REPLAY=FILE]` runs it. With
# CPUPROFILE=FILE in the environment, the start after the kill writes a
# CPU profile of its run (start included) to FILE; with KEEPLOG=FILE,
# that start's log is kept in FILE; with CONFIG=FILE both daemons run
# with that configuration. It also reports the checkpoints the first run
# wrote, and how long the vector index's splits took to be ready after
# the start (with the CPU the daemon used meanwhile).
set -euo pipefail
BIN=$1 DATA=$2 REPLAY=${3:-}
log=$(mktemp)
pid=
# On a failure: the daemon's last lines, and no daemon left running.
trap 'rc=$?; if [ $rc -ne 0 ]; then tail -20 "$log" >&2; [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; fi; if [ -n "${KEEPLOG:-}" ]; then cp "$log" "$KEEPLOG"; fi; rm -f "$log"' EXIT

serve() { # serve [ARG...]: starts the daemon; sets pid, took (s to serving), nats, http
	: >"$log"
	local s e
	s=$(date +%s.%N)
	"$BIN" serve ${CONFIG:+--config "$CONFIG"} --data "$DATA" --nats-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --log-level info "$@" >"$log" 2>&1 &
	pid=$!
	until grep -q "ctxgraph serving" "$log"; do
		kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
		sleep 0.05
	done
	e=$(date +%s.%N)
	took=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }')
	nats=$(grep -o 'nats=nats://[0-9.:]*' "$log" | head -1 | cut -d= -f2)
	http=$(grep -o 'http=[0-9.:]*' "$log" | head -1 | cut -d= -f2)
}

serve
echo "clean start: serving after $took s"
if [ -n "$REPLAY" ]; then
	"$BIN" replay --quiet --nats "$nats" --wait 10m "$REPLAY"
fi
sleep 5
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
grep -E "checkpoint written" "$log" | sed 's/^time=[^ ]* //' || true
serve ${CPUPROFILE:+--cpuprofile "$CPUPROFILE"}
echo "start after the kill: serving after $took s"
grep -E "caught up|caught_up|catching|no record written since|view loaded from|read what changed|vector snapshot|vector index ready|keyword index ready|from the store|rebuild" "$log" | sed 's/^time=[^ ]* //' || true
cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
s=$(date +%s.%N)
ready=0
for _ in $(seq 1 600); do
	ready=$(curl -s "http://$http/metrics" | awk '/^ctxgraph_vector_index_split_ready/ { n += $2 } END { print n + 0 }')
	[ "$ready" -ge 2 ] && break
	sleep 0.5
done
e=$(date +%s.%N)
cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
awk -v s="$s" -v e="$e" -v c0="$cpu0" -v c1="$cpu1" -v r="$ready" 'BEGIN { printf "the vector index splits ready (%d of 2) %.1f s after serving, the daemon using %.1f s of CPU meanwhile\n", r, e - s, (c1 - c0) / 100 }'
grep -E "splits snapshot" "$log" | sed 's/^time=[^ ]* //' || true
sleep 25
rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
echo "25 s later: RSS $rss MB; $(curl -s "http://$http/metrics" | grep -E '^ctxgraph_(store_view|vector_index)_caught_up_records' | tr '\n' ' ')"
kill -INT "$pid"
wait "$pid"
