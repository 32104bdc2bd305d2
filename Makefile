# ctxgraph — make demo runs the daemon end to end; make test runs every test.
GO       ?= go
BIN      := bin/ctxgraph
PKG      ?= ./...
FUZZTIME ?= 30s

.PHONY: all build test race vet fmt-check demo bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ctxgraph

# The README's test command: vet, then every test (unit, daemon end to end
# over real NATS and Badger, real RLDS files), with short fuzz runs.
test: vet fmt-check
	$(GO) test -count=1 -timeout 12m $(PKG)

vet:
	$(GO) vet $(PKG)

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

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeMessage -fuzztime $(FUZZTIME) ./rlds

clean:
	rm -rf bin
