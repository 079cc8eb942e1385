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

sim:
	$(GO) run ./cmd/strandsim $(if $(SEED),-seed $(SEED)) -count $(COUNT) $(if $(BUG),-bug $(BUG)) $(if $(VERBOSE),-verbose)

sim-bugs:
	$(GO) run ./cmd/strandsim -planted-bugs

bench: build
	$(GO) run ./cmd/strandbench

fuzz:
	$(GO) test ./core/batch -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME)
	$(GO) test ./core/log -run '^$$' -fuzz FuzzRecover -fuzztime $(FUZZTIME)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
