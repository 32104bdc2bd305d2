# ctxgraph — make demo runs the daemon end to end; make test runs every test.
GO       ?= go
BIN      := bin/ctxgraph
PKG      ?= ./...
# Badger as ctxgraph carries it (particle/internal/badgerfork, a module
# of its own that ./... leaves out): its tests are of ctxgraph's change.
BADGER_FORK := github.com/dgraph-io/badger/v4
FUZZTIME ?= 30s

.PHONY: all build test race vet fmt-check js-deps rdflib pymsgpack pysnappy demo bench bench-run reopen-time crash-time fuzz soak crash clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ctxgraph

# The README's test command: vet, then every test (unit, daemon end to end
# over real NATS and Badger, real RLDS files), with short fuzz runs.
# The Turtle tests parse every answer with rdflib, the MessagePack wire
# format is checked against messages Python's msgpack writes, and the
# snappy answer coding against python-snappy: all required here.
# The graph store's tests of its unsafe code (records decoded in place,
# edges boxed with their provenance, packed strings, the view snapshot's
# mapped load, loaded and committed edges packed where the collector does
# not scan) run again with -race, whose checkptr catches a pointer
# conversion that straddles an allocation (about 40 s; `make race` runs
# everything so).
RACE_SHORT = 'Pack|Box|KeySlab|IdentityOf|StepIndexes|EdgeChunk|ViewSnapshot|Decode|Staged|LoadedEdges|Kept'
test: vet fmt-check js-deps rdflib pymsgpack pysnappy
	CTXGRAPH_REQUIRE_RDFLIB=1 CTXGRAPH_REQUIRE_PYMSGPACK=1 CTXGRAPH_REQUIRE_PYSNAPPY=1 $(GO) test -count=1 -timeout 12m $(PKG)
	$(GO) test -count=1 $(BADGER_FORK)/...
	$(GO) test -race -count=1 -run $(RACE_SHORT) ./particle
	@$(MAKE) --no-print-directory fuzz FUZZ_TARGETS="$(FUZZ_SHORT_TARGETS)" FUZZTIME=$(FUZZ_SHORT)

# rdflib (Debian's python3-rdflib) is the independent RDF parser the
# planner's Turtle tests use; installed when missing.
rdflib:
	@/usr/bin/python3 -c 'import rdflib' 2>/dev/null || python3 -c 'import rdflib' 2>/dev/null || \
	{ apt-get update -qq && apt-get install -y -qq python3-rdflib; }

pymsgpack:
	@/usr/bin/python3 -c 'import msgpack' 2>/dev/null || python3 -c 'import msgpack' 2>/dev/null || \
	{ apt-get update -qq && apt-get install -y -qq python3-msgpack; }

# python-snappy (Debian's python3-snappy, over libsnappy) reads the planner
# answers' snappy coding in planner/contentenc's interop test.
pysnappy:
	@/usr/bin/python3 -c 'import snappy' 2>/dev/null || python3 -c 'import snappy' 2>/dev/null || \
	{ apt-get update -qq && apt-get install -y -qq python3-snappy; }

vet:
	$(GO) vet $(PKG)

# The independent reader of exports (apache-arrow and hyparquet on Node.js,
# rlds/arrowexport/testdata/js) that the export tests run when installed.
JSDIR := rlds/arrowexport/testdata/js
js-deps:
	@if command -v npm >/dev/null; then npm ci --prefix $(JSDIR) --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the export's independent reader check will be skipped"; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

race:
	$(GO) test -race -count=1 $(PKG)

# The main job: a daemon on a fresh temp dir, the testdata episodes and CMS
# spans streamed in through NATS, a planner question, a clean shutdown.
demo: build
	@./cmd/ctxgraph/demo.sh $(BIN)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKG)

# Not in `make test`: the measured run behind BENCHMARKS.md (the medium
# fleet through a real daemon; a few minutes). BENCH_FLAGS adds flags.
BENCH_PRESET ?= medium
bench-run: build
	./$(BIN) bench run --preset $(BENCH_PRESET) --json bin/bench-$(BENCH_PRESET).json $(BENCH_FLAGS)

# The reopen of a real restart: a fresh `serve` on an existing data
# directory (a stopped daemon's, e.g. one kept with `bench run --data DIR`),
# timed from process start to its "ctxgraph serving" log line, with the
# process's CPU time and page faults to then and what its load marked for
# huge pages (or why nothing). COLD=1 first drops the directory's files
# from the page cache (as after a reboot; dd's nocache,
# POSIX_FADV_DONTNEED: no privileges needed), and the line then says how
# much the start read from the disk. GAP=S waits S seconds before the
# start: on a VM whose host takes free memory back, memory freed by the
# last stop is taken back within seconds (BENCHMARKS.md, seventy-fifth
# round), so `make reopen-time DATA=DIR GAP=20` times a start after a pause.
reopen-time: build
	@test -d "$(DATA)" || { echo "usage: make reopen-time DATA=<a stopped daemon's data directory> [COLD=1] [GAP=<seconds>]" >&2; exit 2; }
	@if [ -n "$(COLD)" ]; then find "$(DATA)" -type f -exec dd if={} iflag=nocache count=0 status=none \; ; fi
	@if [ -n "$(GAP)" ]; then sleep "$(GAP)"; fi
	@log=$$(mktemp); s=$$(date +%s.%N); \
	./$(BIN) serve --data "$(DATA)" --nats-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --log-level info >$$log 2>&1 & pid=$$!; \
	until grep -q "ctxgraph serving" $$log; do \
		kill -0 $$pid 2>/dev/null || { cat $$log; rm -f $$log; exit 1; }; sleep 0.05; \
	done; \
	e=$$(date +%s.%N); rb=$$(awk '/^read_bytes/ {print $$2}' /proc/$$pid/io 2>/dev/null); \
	cpu=$$(awk '{ printf "user %.1f s, system %.1f s, %d minor faults", $$14 / 100, $$15 / 100, $$10 }' /proc/$$pid/stat); \
	hp=$$(grep -o "msg=\"the load.s heap fault[^\"]*\".*" $$log | head -1); \
	kill -INT $$pid; wait $$pid; rm -f $$log; \
	awk -v s=$$s -v e=$$e -v rb="$$rb" -v cpu="$$cpu" 'BEGIN { printf "ready after %.2f s", e - s; if (rb != "") printf ", %.0f MB read from the disk", rb / 1e6; printf "; %s\n", cpu }'; \
	if [ -n "$$hp" ]; then echo "$$hp"; fi

# A start after a crash on a stopped daemon's data directory: a start,
# REPLAY's messages streamed in (optional), SIGKILL, then a timed start
# that catches up from the snapshots the killed run left.
crash-time: build
	@test -d "$(DATA)" || { echo "usage: make crash-time DATA=<a stopped daemon's data directory> [REPLAY=<wire-format JSONL>] [CONFIG=<daemon config>]" >&2; exit 2; }
	@cmd/ctxgraph/crashtime.sh ./$(BIN) "$(DATA)" "$(REPLAY)"

# Fuzz targets, as package:Target. `make test` runs the decoders of outside
# input (step, span and planner request JSON and msgpack, TFRecord, Example, backup
# file, policy edit, a damaged view snapshot, Accept-Encoding and a compressed
# answer) for FUZZ_SHORT each; `make fuzz`
# runs every target for FUZZTIME.
# FUZZ_SHORT is a count of inputs, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# the time runs out while a worker is busy (golang/go#75804, fixed in Go 1.27),
# which failed `make test` once on a loaded machine with no input to blame.
FUZZ_SHORT_TARGETS ?= ./rlds:FuzzDecodeMessage ./rlds:FuzzDecodeMsgpack ./cms:FuzzDecode ./planner:FuzzDecodeRequest \
	./rlds:FuzzTFRecordReader ./rlds:FuzzExample ./cmd/internal/backupfile:FuzzReader ./particle:FuzzPolicyEdit \
	./particle:FuzzViewSnapshotLoad ./planner/contentenc:FuzzContentCodings
FUZZ_TARGETS ?= $(FUZZ_SHORT_TARGETS) ./particle:FuzzDecodeValue ./particle:FuzzDecodeApart ./rlds:FuzzDecodeStep ./wave:FuzzReadHNSW ./wave:FuzzReadIVF ./planner:FuzzJSONString
FUZZ_SHORT ?= 20000x

fuzz:
	@log=$$(mktemp); for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; \
	done; rm -f $$log

# Not in `make test`: the fleet-load soak (200 controllers at 10 Hz and 50
# planner requests/s for 60 s against a daemon process on loopback), and
# the crash test with many more kills.
soak: build
	./$(BIN) soak --controllers 200 --rate 10 --planner-rps 50 --duration 60s

KILLS ?= 50
crash:
	CTXGRAPH_CRASH_KILLS=$(KILLS) $(GO) test -count=1 -run '^TestCrashSafety$$' -v -timeout 30m ./cmd/internal/daemon

clean:
	rm -rf bin
