# txkernel. One set of build flags for build, test and bench, so the build
# cache is shared. Nothing here needs cgo yet (SQLite arrives with the
# document store; its install steps will live here too).
GO       ?= go
BIN      := bin/txkernel
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
SHARED   ?= ../shared
# The demo's real input: the largest of the 100 real fzf commits.
DEMO_COMMIT ?= $(SHARED)/corpora/patches/fzf/025-ae3180f91994
FUZZTIME ?= 30s
GOBIN    := $(shell $(GO) env GOPATH)/bin

.PHONY: all build test test-short vet lint demo bench fuzz crash clean

all: build

## build: write bin/txkernel
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/txkernel

## test: vet, then every test with the race detector (the end-to-end tests
## build and drive the real binary, also with -race)
test: vet
	$(GO) test -race -count=1 ./...

test-short: vet
	$(GO) test -count=1 ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

## lint: staticcheck (installed from the Go module proxy on first use)
lint: vet
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$(GOBIN)/staticcheck ./...

## demo: build, then run a real host session against a copy of a real
## commit's workspace: the proposal, the first apply/execute answering
## ok:false with pendingApprovals, the decision, then the apply (ok:true)
demo: build
	@if [ -d "$(DEMO_COMMIT)" ]; then commit="$(DEMO_COMMIT)"; else \
	  echo "($(DEMO_COMMIT) is absent; using the bundled sample workspace)"; commit=testdata/demo; fi; \
	$(GO) run ./examples/host -kernel $(BIN) -commit "$$commit"

## bench: benchmarks, 6 runs each, summarised with benchstat
bench:
	@mkdir -p bench
	@test -x $(GOBIN)/benchstat || $(GO) install golang.org/x/perf/cmd/benchstat@latest
	$(GO) test -run '^$$' -bench . -count 6 -timeout 60m ./... | tee bench/latest.txt
	$(GOBIN)/benchstat bench/latest.txt
	$(GOBIN)/benchstat -col /impl -filter '.name:HostSession' bench/latest.txt

## crash: the long reliability run (RELIABILITY.md): 600 kill -9 at random
## moments plus every failpoint on the 5 largest fzf commits, and the
## power-loss model on the same commits with up to 256 states per crash point
CRASH_ITERATIONS ?= 600
crash:
	@mkdir -p bench
	@$(GO) test -count=1 -timeout 120m -run 'TestCrashHarness|TestPowerLoss' ./cmd/txkernel -v \
	  -crash.iterations $(CRASH_ITERATIONS) -crash.commits 5 \
	  -powerloss.commits all-largest -powerloss.max 256 > bench/crash.txt 2>&1; status=$$?; \
	  grep -v -e '^=== RUN' -e '^    --- PASS' bench/crash.txt; exit $$status

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

clean:
	rm -rf bin bench/latest.txt
