# txkernel. One set of build flags for build, test and bench, so the build
# cache is shared (the tests add one tag, failpoints: see TEST_TAGS).
# kernel.db is SQLite through github.com/mattn/go-sqlite3, which is cgo and
# bundles SQLite's amalgamation: it needs a C compiler (gcc, installed by
# .ci/run) and no system libsqlite3 (sqlite-vec's cgo bindings need only its
# header, libsqlite3-dev). Its cold build took 73 s and 97 s wall, about
# 100 s of CPU, on the 2-core VM shared with other work
# (GOCACHE=$(mktemp -d) time make build);
# every target below passes TAGS (or TEST_TAGS, TAGS plus a tag SQLite does
# not see) so that it is compiled once and reused.
#   sqlite_fts5: FTS5, for the corpus index (BM25 keyword search).
GO       ?= go
TAGS     ?= sqlite_fts5
# TEST_TAGS, for every test, benchmark, fuzz and vet run: TAGS plus
# failpoints, which compiles internal/failpoint's crash injection
# (TXKERNEL_FAILPOINTS) in. The release binary (make build) is built
# without it: its failpoints are no-ops and it never reads the variable
# (make check-release). The tag selects files of internal/failpoint only,
# so the two sets share everything in the cache that does not import it,
# SQLite's cgo build included. Measured from a cold cache: the release
# build 161 s (93 s CPU), then the binary with TEST_TAGS 2.9 s (3.4 s CPU:
# failpoint and the 7 packages above it, then a link), then the release
# build again 1.5 s (a link).
TEST_TAGS ?= $(TAGS) failpoints
export CGO_ENABLED = 1
# sqlite-vec's AVX kernel for L2 distance (the vector search's inner loop),
# when this CPU has AVX. CGO_CFLAGS is part of the build cache key, so it
# is set here once for build, test and bench alike.
AVX_CFLAGS := $(shell grep -qw avx /proc/cpuinfo 2>/dev/null && echo "-mavx -DSQLITE_VEC_ENABLE_AVX")
export CGO_CFLAGS = -O2 -g $(AVX_CFLAGS)
BIN      := bin/txkernel
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/txkernel/txkernel/internal/cli.Version=$(VERSION)
SHARED   ?= ../shared
# The demo's real input: the largest of the 100 real fzf commits.
DEMO_COMMIT ?= $(SHARED)/corpora/patches/fzf/025-ae3180f91994
FUZZTIME ?= 30s
GOBIN    := $(shell $(GO) env GOPATH)/bin

.PHONY: all build check-release test test-short vet lint doc-comments demo demo-docs demo-memory demo-team demo-corpus eval eval-data bench fuzz crash clean mcp-inspector bench-buckets

all: build

## build: write bin/txkernel, the release binary (no failpoints)
build:
	@if [ "$$($(GO) list -tags "$(TAGS)" -f '{{.Stale}}' github.com/mattn/go-sqlite3 2>/dev/null)" = true ]; then \
	  echo "(first build: compiling SQLite's C amalgamation takes 1-2 minutes on 2 cores; later builds reuse it)"; fi
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/txkernel

## check-release: build, then fail if the release binary has failpoints
## compiled in (the variable's name appears in it only then)
check-release: build
	@if grep -q TXKERNEL_FAILPOINTS $(BIN); then \
	  echo "$(BIN) contains TXKERNEL_FAILPOINTS: failpoints are compiled into the release build"; exit 1; fi

## test: vet, check-release and doc-comments (at once), then every test, with the race
## detector but for PROCESS_PKGS and VOLUME_TESTS
## (the end-to-end tests, under e2e/, drive the real binary, built once
## for all of them in bin/test, without -race unless TXKERNEL_RACE_PROCESS=1:
## the kernel's code runs under -race in-process; go test runs the
## packages in parallel). GORACE=atexit_sleep_ms=50: a -race binary
## sleeps 1 s before it exits, to let late reports through, and there is
## one test binary per package; 50 ms still lets them through.
## It says when a cold race build is about to compile SQLite (minutes of
## silence otherwise), and closes with internal/testreport's summary: the
## packages that ran, every skip grouped by its reason (a missing
## PostgreSQL, chromium, node, git or strace, or shared test data), and
## "N passed, N failed, N skipped".
empty :=
space := $(empty) $(empty)

# PROCESS_PKGS are the e2e packages whose tests only drive processes (the
# kernel, git, strace, the MCP SDK's client): make test runs them without
# -race, beside the race run of every other package, at the same time.
# The kernel they start is built without -race anyway (harness.Bin), so
# the race detector would check the tests' own driver, at 4x the cost:
# e2e/crash took 116 s under -race, 25 s without. What e2e/crash runs
# in-process, recovery, tx's own tests run under -race.
#
# go test starts packages in the order it is given them, -p at a time, so
# each list names its longest packages first: a long package started last
# ran alone at the end (unidiff and workspace, 27 s of a 137 s run).
#
# TEST_LDFLAGS: make test's test binaries carry no DWARF (-w), which
# nothing in a test run reads (stack traces and race reports use the
# symbol table): linking the kernel's race test binary took 3.3 s of CPU
# with it and 1.9 s without, and make test links 56 binaries.
TEST_LDFLAGS = -ldflags=-w
PROCESS_PKGS = ./e2e/crash ./e2e/hostile ./e2e/host ./e2e/bench ./e2e/mcp ./e2e/framing ./e2e/client
RACE_FIRST = ./e2e/memory ./corpus ./e2e/desk ./store/postgres ./unidiff ./memory ./workspace ./kernel ./e2e/corpus ./tx
RACE_PKGS = $(RACE_FIRST) $(shell $(GO) list ./... | grep -v -E '/e2e/(bench|client|crash|framing|host|hostile|mcp)$$' \
  | grep -v -x -E '$(subst $(space),|,$(patsubst ./%,github.com/txkernel/txkernel/%,$(RACE_FIRST)))')
# VOLUME_TESTS (package:TestName) are the volume tests (internal/testenv):
# about a real corpus's size, not concurrency, they skip under -race, and
# make test runs them without it, at the same time as the rest
# (internal/doccheck TestVolumeTestsListed keeps this list and the tests
# that call testenv.Volume the same).
VOLUME_TESTS = corpus:TestCorpusDeleteRestore corpus:TestCorpusFolderRFCs corpus:TestCorpusSeedGates embedding:TestBuiltinSciFactTrain \
  memory:TestMemorySmoke memory:TestMemorySmokePostgres secrets:TestPrefiltersChangeNothing secrets:TestSharedCorporaFindings
# SCRATCH: the race run's and the volume run's temporary files (TMPDIR)
# are on tmpfs when there is one. Those tests check what the code does
# with files, not the disk under them: the order of writes, renames and
# fsyncs (failpoints, strace), the bytes. On this VM's ext4, their churn
# of created and deleted files made the inode allocator (find_inode_bit,
# recently_deleted: perf record -a) the largest cost of make test: its
# system CPU went from 77-83 s to 50 s, and unidiff's tests alone from
# 14.5 s to 8.2 s of wall time.
# The process run (kill -9, the power-loss trace, real pipes) keeps the
# default TMPDIR: it is the one that stands for a real disk. The scratch
# held 409 MB at most during a make test (df, sampled each second); a
# SCRATCH with under 1 GiB free, or mounted noexec (the tests run
# binaries they build there), is not used.
SCRATCH ?= /dev/shm
VOLUME_PKGS = $(sort $(foreach v,$(VOLUME_TESTS),./$(firstword $(subst :, ,$(v)))))
VOLUME_RUN = ^($(subst $(space),|,$(sort $(foreach v,$(VOLUME_TESTS),$(lastword $(subst :, ,$(v)))))))$$
test:
	@$(MAKE) --no-print-directory -j3 vet check-release doc-comments
	@if [ "$$($(GO) list -race -tags "$(TEST_TAGS)" -f '{{.Stale}}' github.com/mattn/go-sqlite3 2>/dev/null)" = true ]; then \
	  echo "(first race build: compiling SQLite's C amalgamation with -race takes 2-4 minutes on 2 cores before any test prints)"; fi
	@$(GO) build -o bin/testreport ./internal/testreport
	@set -e; d=$(CURDIR)/bin/test; mkdir -p $$d; \
	  $(GO) build $(if $(filter 1,$(TXKERNEL_RACE_PROCESS)),-race) -tags "$(TEST_TAGS)" -o $$d/txkernel ./cmd/txkernel & a=$$!; \
	  b=; if [ "$(TXKERNEL_RACE_PROCESS)" = 1 ]; then $(GO) build -tags "$(TEST_TAGS)" -o $$d/txkernel-norace ./cmd/txkernel & b=$$!; fi; \
	  $(GO) build -tags "$(TEST_TAGS)" -o $$d/jsonrpcecho ./internal/jsonrpcecho; wait $$a; \
	  if [ -n "$$b" ]; then wait $$b; else cp $$d/txkernel $$d/txkernel-norace; fi
	@scratch=$$(mktemp -d $(SCRATCH)/txktest.XXXXXX 2>/dev/null) && trap 'rm -rf "$$scratch"' EXIT && chmod 1777 $$scratch \
	  && [ "$$(df -Pk $$scratch | awk 'NR==2{print $$4}')" -ge 1048576 ] \
	  && printf '#!/bin/sh\n' > $$scratch/exec && chmod +x $$scratch/exec && $$scratch/exec && rm $$scratch/exec \
	  && tmp=$$scratch || { echo "($(SCRATCH) missing, under 1 GiB free or noexec: the race run's temporary files stay in $${TMPDIR:-/tmp})"; tmp=$${TMPDIR:-/tmp}; }; \
	TXKERNEL_TEST_BINDIR=$(CURDIR)/bin/test GORACE=$${GORACE:-atexit_sleep_ms=50} bin/testreport \
	  env TMPDIR=$$tmp $(GO) test -tags "$(TEST_TAGS)" $(TEST_LDFLAGS) -race -count=1 -timeout 30m -json $(RACE_PKGS) --- \
	  $(GO) test -tags "$(TEST_TAGS)" $(TEST_LDFLAGS) -count=1 -timeout 30m -json $(PROCESS_PKGS) --- \
	  env TMPDIR=$$tmp $(GO) test -tags "$(TEST_TAGS)" $(TEST_LDFLAGS) -count=1 -timeout 30m -json -run '$(VOLUME_RUN)' $(VOLUME_PKGS)

## test-short: vet and check-release, then the tests with -short, no -race
## (the heavy tests skip: every test that builds and runs the real binary,
## those that need a PostgreSQL server, and the real-corpus runs)
test-short: vet check-release
	$(GO) test -tags "$(TEST_TAGS)" -short -count=1 ./...

## vet: gofmt, go.mod and go.sum tidy, go vet with both tag sets (the
## release build's internal/failpoint/off.go is only compiled without
## failpoints)
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet -tags "$(TEST_TAGS)" ./...
	$(GO) vet -tags "$(TAGS)" ./...

## doc-comments: staticcheck's ST1020, ST1021 and ST1022 only (the doc
## comment of an exported function, type or variable starts with its
## name), so a renamed identifier cannot keep a stale comment; make test
## runs it. staticcheck is installed from the Go module proxy on first use,
## as for lint.
doc-comments:
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$(GOBIN)/staticcheck -tags "$(TEST_TAGS)" -checks ST1020,ST1021,ST1022 ./...

## lint: staticcheck (installed from the Go module proxy on first use)
lint: vet
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$(GOBIN)/staticcheck -tags "$(TEST_TAGS)" ./...

## demo: build, then run a real host session against a copy of a real
## commit's workspace: the proposal, the first apply/execute answering
## ok:false with pendingApprovals, the decision, then the apply (ok:true)
demo: build
	@if [ -d "$(DEMO_COMMIT)" ]; then commit="$(DEMO_COMMIT)"; else \
	  echo "($(DEMO_COMMIT) is absent; using the bundled sample workspace)"; commit=testdata/demo; fi; \
	$(GO) run ./examples/host -kernel $(BIN) -commit "$$commit"

## demo-docs: build, then walk document patching on a closing checklist with
## an email's patch envelope: validate, apply, an idempotent replay,
## a stale revision refused
demo-docs: build
	$(GO) run ./examples/host -kernel $(BIN) -checklist testdata/demo-checklist

## demo-memory: build, then run curated memory on the real RFC backlog
## (copied into a temporary git repository as backlog/): ingest, read with
## citations, propose, an agent posing as a curator refused, accept,
## promote; then an agent outside its scope, a stale proposal rebased, and
## an invented citation flagged
RFCS ?= $(SHARED)/corpora/rust-rfcs/text
demo-memory: build
	@test -d "$(RFCS)" || { echo "$(RFCS) is absent: demo-memory needs the shared RFC backlog"; exit 1; }
	$(GO) run ./examples/host -kernel $(BIN) -memory $(RFCS)

## demo-team: build, then two kernels (two workspaces, two data dirs) share
## one curated memory in a throwaway PostgreSQL started from the installed
## binaries: A ingests the RFC backlog, B reads and proposes, A accepts and
## promotes, B reads the new version; then both accept at once and one
## wins. TEAM_STORE=postgres://… uses a team's own database instead.
demo-team: build
	@test -d "$(RFCS)" || { echo "$(RFCS) is absent: demo-team needs the shared RFC backlog"; exit 1; }
	$(GO) run ./examples/host -kernel $(BIN) -team $(RFCS) $(if $(TEAM_STORE),-memory-store '$(TEAM_STORE)')

## demo-corpus: build, then open a 1,200-section correspondence log built
## from the shared RFC corpus (testdata/corpus/mkfixture.go) as a corpus:
## the default route (linear_tail), a semantic search with citations, a
## governance filter, an append the watcher makes searchable (its latency),
## and a rebuild reporting $/progress
demo-corpus: build
	@test -d "$(RFCS)" || { echo "$(RFCS) is absent: demo-corpus builds its log from the shared RFC corpus"; exit 1; }
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  $(GO) run testdata/corpus/mkfixture.go -rfcs "$(RFCS)" -sections 1200 -out "$$tmp/OPEN_QUESTIONS.md" -truth "$$tmp/truth.json" && \
	  $(GO) run ./examples/host -kernel $(BIN) -corpus "$$tmp/OPEN_QUESTIONS.md"

## eval-data: fail, naming what is missing, unless SciFact is there (eval
## checks it before it builds anything)
eval-data:
	@for f in corpus.jsonl queries.jsonl qrels/train.tsv; do test -f "$(SCIFACT)/$$f" || { \
	  echo "$(SCIFACT)/$$f is absent: make eval needs BEIR SciFact (corpus.jsonl, queries.jsonl, qrels/train.tsv); set SCIFACT=DIR or SHARED=DIR"; exit 1; }; done

## eval: retrieval quality on SciFact's train split (the only split tuned
## on): index the corpus with the built-in embedder, run the 809 train
## queries in each mode, print nDCG@10 and recall@100, write TREC runs
SCIFACT ?= $(SHARED)/corpora/scifact
eval: eval-data build
	@mkdir -p bench
	$(BIN) eval beir --corpus $(SCIFACT)/corpus.jsonl --queries $(SCIFACT)/queries.jsonl \
	  --qrels $(SCIFACT)/qrels/train.tsv --run bench/scifact-train.run --mode all

## bench: benchmarks, 6 runs each, summarised with benchstat
bench:
	@mkdir -p bench
	@test -x $(GOBIN)/benchstat || $(GO) install golang.org/x/perf/cmd/benchstat@latest
	$(GO) test -tags "$(TEST_TAGS)" -run '^$$' -bench . -count 6 -timeout 60m ./... | tee bench/latest.txt
	$(GOBIN)/benchstat bench/latest.txt
	$(GOBIN)/benchstat -col /impl -filter '.name:HostSession' bench/latest.txt
	$(GOBIN)/benchstat -col /impl -filter '.name:RoundTrip' bench/latest.txt
	$(GOBIN)/benchstat -col /impl -filter '.name:Patch20Ops' bench/latest.txt

## bench-buckets: the main job by file count (1-10, 11-100, 101+ files):
## the fzf commits, the largest ones combined and two sweeping renames across
## the Rust RFCs, each against git apply, durable git (git apply, then an
## fsync of each file it wrote and of their directories, 16 in flight) and
## the write+fsync floor, per bucket and overall, with propose and apply
## and the promise floor (the I/O of RELIABILITY.md §10's fsync rounds alone);
## approval=policy runs the kernel under --approval-policy never (propose,
## apply), approval=person under untrusted (propose, ask, approve, apply)
BENCH_BUCKETS_COUNT ?= 3
bench-buckets:
	@mkdir -p bench
	$(GO) test -tags "$(TEST_TAGS)" -run '^$$' -bench BenchmarkHostSessionBuckets -benchtime 1x -count $(BENCH_BUCKETS_COUNT) -timeout 60m ./e2e/bench | tee bench/buckets.txt

## crash: the long reliability run (RELIABILITY.md): 600 kill -9 at random
## moments plus every failpoint on the 5 largest fzf commits, and the
## power-loss model on the same commits with up to 256 states per crash point
CRASH_ITERATIONS ?= 600
crash:
	@mkdir -p bench
	@$(GO) test -tags "$(TEST_TAGS)" -count=1 -timeout 120m -run 'TestCrashHarness|TestPowerLoss' ./e2e/crash -v \
	  -crash.iterations $(CRASH_ITERATIONS) -crash.commits 5 \
	  -powerloss.commits all-largest -powerloss.max 256 -powerloss.controls untrusted,never > bench/crash.txt 2>&1; status=$$?; \
	  grep -v -e '^=== ' -e '^  *--- PASS' bench/crash.txt; exit $$status

## mcp-inspector: drive `txkernel mcp` with the official MCP Inspector CLI
## (npx fetches @modelcontextprotocol/inspector@2.12.0 from npm): the tool
## list's --strict portability check, turn_start then apply_execute, a tool
## error (exit 5), and tools/list over streamable HTTP with a bearer token.
## Not part of make test: it needs the npm registry.
mcp-inspector:
	TXKERNEL_INSPECTOR=1 $(GO) test -tags "$(TEST_TAGS)" -count=1 -run TestInspectorCLI -v ./e2e/mcp

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -tags "$(TEST_TAGS)" -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -tags "$(TEST_TAGS)" -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

clean:
	rm -rf bin bench/latest.txt
