# The engagement scheduler's developer commands. `make help` lists them.
#
# Nothing needs to be running: when DATABASE_URL is unset and no PostgreSQL
# answers on 127.0.0.1:5432, the tests and the demo start a throwaway cluster
# from the system's PostgreSQL binaries (installing Debian's postgresql
# package if needed). `make pg-stop` stops it.

GO        ?= go
BIN       ?= bin
BINARIES  := $(patsubst cmd/%/,%,$(wildcard cmd/*/))
BENCH_USERS ?= 200000

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## Run every test against a real PostgreSQL
	$(GO) test -count=1 ./...

.PHONY: test-race
test-race: ## Run the tests with the race detector
	$(GO) test -count=1 -race ./...

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: demo
demo: build ## Seed sample users in a throwaway database, run the jobs and deliver the messages
	$(GO) run ./internal/demo -bin $(BIN)

.PHONY: bench
bench: ## Benchmark the jobs against single statements (BENCH_USERS=200000) and queue throughput
	BENCH_USERS=$(BENCH_USERS) $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./scheduler
	$(GO) test -run '^$$' -bench Queue -benchtime 2x -timeout 30m ./sender

.PHONY: pg-stop
pg-stop: ## Stop the throwaway PostgreSQL the tests or the demo started, if any
	$(GO) run ./internal/pgtest/devdb --stop

.PHONY: clean
clean: ## Remove built binaries
	rm -rf $(BIN)
