# Strand's build, test and benchmark entry points. See README.md.
SHELL := /bin/bash
GO ?= go
SEED ?=
COUNT ?= 1
BUG ?=
VERBOSE ?=
FUZZTIME ?= 30s

.PHONY: build run test sim sim-bugs bench fuzz lint soak

build:
	$(GO) build -o bin/strand ./cmd/strand

run: build
	./bin/strand serve

# All tests. realnet runs with -race (CLARIFICATIONS.md, "Testing the real build").
test: build
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 14m $$($(GO) list ./... | grep -v /realnet)
	$(GO) test -count=1 -race -timeout 14m ./realnet/...

# The kill -9 loop against real strand processes, long: SOAK_KILLS leader
# kills per idempotence setting (CLARIFICATIONS.md, "Testing the real build
# under faults"); `make test` runs the same loop with 3.
SOAK_KILLS ?= 50
soak:
	STRAND_SOAK_KILLS=$(SOAK_KILLS) $(GO) test -count=1 -race -timeout 120m -run '^TestKillLoop' -v ./realnet/

sim:
	$(GO) run ./cmd/strandsim $(if $(SEED),-seed $(SEED)) -count $(COUNT) $(if $(BUG),-bug $(BUG)) $(if $(VERBOSE),-verbose) $(if $(SHAPE),-shape $(SHAPE))

sim-bugs:
	$(GO) run ./cmd/strandsim -planted-bugs

# Every benchmark section, or only those in SECTION (e.g. SECTION=broker).
# The broker section runs bin/strand (built here) and kfake as processes.
SECTION ?= all
bench: build
	$(GO) run ./cmd/strandbench -section $(SECTION)

# Each Go fuzz target for FUZZTIME. -fuzzminimizetime keeps a busy machine from
# spending minutes shrinking one new corpus entry.
FUZZ_TARGETS := ./core/batch:FuzzCheck ./core/batch:FuzzBuild ./core/batch:FuzzPrecheckMatchesCheck \
	./core/log:FuzzRecover ./core/wire:FuzzParseRequest ./core/wire:FuzzRequestStream ./core/config:FuzzParseProperties \
	./core/broker:FuzzProduceRequest \
	./realnet/auth:FuzzParsePlainMessage ./realnet/auth:FuzzParseContextToken ./realnet/auth:FuzzParseWrapToken \
	./realnet/auth:FuzzGSSAPIExchange ./realnet/auth:FuzzParsePEM \
	./realnet/auth:FuzzParseScramClientFirst ./realnet/auth:FuzzParseScramClientFinal ./realnet/auth:FuzzScramExchange
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn in $$pkg"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
