# The engagement scheduler's developer commands. `make help` lists them.
#
# Nothing needs to be running: when DATABASE_URL is unset and no PostgreSQL
# answers on 127.0.0.1:5432, the tests and the demo start a throwaway cluster
# from the system's PostgreSQL binaries (installing Debian's postgresql
# package if needed). `make pg-stop` stops it; `make services-stop` stops it
# and everything else the tests started (Redis, leftovers of killed runs).

GO        ?= go
BIN       ?= bin
BINARIES  := $(patsubst cmd/%/,%,$(wildcard cmd/*/))
# What --version prints: the nearest tag, or the commit, from git.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/engagement-scheduler/engagement/internal/cli.Version=$(VERSION)
BENCH_USERS ?= 200000
BENCH_ROUNDS ?= 3
BENCH_SIZES ?= 10000,100000
BENCH_MESSAGES ?= 20000
# The queue suite's rounds: each runs queue-process, the bare requests and
# River side by side; the ratios are the median over them (issue 59).
BENCH_QUEUE_ROUNDS ?= 3
BENCH_SUITES ?= scaling,queue,paced,chaos,pooler
# The pooler suite's users (engagement-daily through PgBouncer vs direct),
# and seeded databases the bench tool copies instead of seeding
# (comma-separated names; each serves the size its user count matches).
BENCH_POOLER_USERS ?= 1000000
BENCH_TEMPLATE_DB ?=
# A count, not a duration: a -fuzztime duration races Go 1.26's fuzz
# coordinator at the deadline and fails with a bare "context deadline
# exceeded" (golang/go#75804, fixed in Go 1.27).
FUZZTIME  ?= 50000x
DOCKER    ?= docker
IMAGE     ?= engagement-scheduler:dev
RACE      ?=
BENCH_SMOKE_USERS ?= 10000
CONSOLE_ADDR ?= 127.0.0.1:8080
# The console's page benchmark: its users (with 5 messages and 2 moves
# each); 1,000,000 is the size its 300 ms target is set at.
CONSOLE_BENCH_USERS ?= 1000000

# Pinned tools, installed through the Go module proxy on first use into
# TOOLS (one directory per version, so bumping a version reinstalls).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOVULNCHECK_VERSION   ?= v1.8.0
GOVULNDB  ?= https://vuln.go.dev
TOOLS     ?= $(shell $(GO) env GOPATH)/tools
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
GOVULNCHECK   := $(TOOLS)/govulncheck-$(GOVULNCHECK_VERSION)/govulncheck

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into bin/
	@mkdir -p $(BIN)
	@echo "build: compiling the binaries into $(BIN)/ (the first time, Go downloads the modules and compiles them: a few minutes)"
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

.PHONY: image
image: ## Build the container image with all five binaries (IMAGE=engagement-scheduler:dev; needs Docker)
	$(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null) -t $(IMAGE) .

.PHONY: test
# -parallel 4: most parallel tests wait on the binaries, receivers, browser
# and servers they drive; go test's default (GOMAXPROCS, 2 on a 2-core
# machine) left a core idle while they waited. docs/development.md, "Where
# the suite's time goes".
# A line every 30 s, how long and how many packages are done: the first
# compile prints nothing for minutes, and the last package can run alone
# for a minute (issue 60). dash has no pipefail: go test's status goes
# through a file.
# internal/testkit/testrun is go test -count=1 that links a test binary only
# when its package changed (the 50 links cost some 40 s of CPU a run); it
# keeps them in the user's cache directory (about 1 GB a checkout).
TEST_CMD = $(GO) run ./internal/testkit/testrun $(if $(P),-p $(P)) -parallel 4 $(if $(RACE),-race) ./...
test: test-deps ## Run every test against a real PostgreSQL (RACE=1: with the race detector)
	@echo "test: compiling the test binaries, then running every package's tests, the longest first (each package is printed when it is done; the first compile takes minutes; a line every 30 s until it ends)"
	@out=$$(mktemp) && rc=$$(mktemp) && total=$$($(GO) list ./... | wc -l) && began=$$(date +%s) && \
	echo "$(TEST_CMD)" && \
	{ ( while sleep 30 > /dev/null; do echo "test: still running, $$(($$(date +%s) - began)) s in, $$(grep -cE '^(ok|FAIL|\?)[[:space:]]+[a-z]' $$out) of $$total packages done"; done ) & } && ticker=$$! && \
	{ $(TEST_CMD) 2>&1; echo $$? > $$rc; } | tee $$out; \
	kill $$ticker 2>/dev/null; status=$$(cat $$rc); rm -f $$out $$rc; \
	echo "test: done in $$(($$(date +%s) - began)) s"; exit $$status

.PHONY: test-deps
test-deps: ## Say what the tests need, install what is missing (Debian packages), start the throwaway PostgreSQL and Redis
	@echo "test-deps: compiling the test kit's preparer (the first time, Go downloads the modules and compiles them: a few minutes)"
	$(GO) run ./internal/testkit/localsvc/prepare

.PHONY: test-race
test-race: ## Run the tests with the race detector (make test RACE=1)
	$(MAKE) --no-print-directory test RACE=1

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go mod tidy, go vet and golangci-lint (.golangci.yml)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod and go.sum are not tidy: run go mod tidy"; exit 1; }
	@echo "lint: go vet ./... ($$($(GO) list ./... | wc -l) packages; minutes on a fresh 2-core machine, which compiles them first)"
	$(GO) vet ./...
	@echo "lint: the benchmark module (bench/, a module of its own) builds and vets, so it cannot rot unseen"
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	@echo "lint: installing golangci-lint $(GOLANGCI_LINT_VERSION) through the Go module proxy (it compiles from source: several minutes on a fresh 2-core machine; a line per 100 packages compiled)"
	@mkdir -p $(@D)
	GOBIN=$(@D) $(GO) install -v github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) 2>&1 | tee $(@D)/install.log \
	  | awk '{ n++ } n % 100 == 0 { print "lint: golangci-lint: " n " packages compiled"; fflush() } END { print "lint: golangci-lint: " n " packages compiled" }'
	@test -x $@ || { cat $(@D)/install.log; echo "lint: installing golangci-lint failed (above)"; exit 1; }

.PHONY: vuln
vuln: ## govulncheck the module; skipped, saying why, when it cannot be installed or its database does not answer
	@if ! [ -x $(GOVULNCHECK) ] && ! GOBIN=$(dir $(GOVULNCHECK)) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION); then \
	  echo "vuln: SKIPPED: govulncheck@$(GOVULNCHECK_VERSION) could not be installed from the Go module proxy"; exit 0; \
	fi; \
	out=$$($(GOVULNCHECK) -db $(GOVULNDB) ./... 2>&1); rc=$$?; echo "$$out"; \
	if [ $$rc -ne 0 ] && [ $$rc -ne 3 ] && echo "$$out" | grep -q 'fetching vulnerabilities'; then \
	  echo "vuln: SKIPPED: the vulnerability database $(GOVULNDB) did not answer (see above); nothing was checked"; exit 0; \
	fi; \
	if [ $$rc -ne 0 ]; then echo "vuln: FAILED (govulncheck exit $$rc)"; exit $$rc; fi; \
	echo "vuln: no known vulnerability is reachable from this module's code"

.PHONY: bench-smoke
bench-smoke: ## Every benchmark once at BENCH_SMOKE_USERS (10000) users: they still run, and the numbers stay sane
	BENCH_USERS=$(BENCH_SMOKE_USERS) BENCH_MESSAGES=$(BENCH_SMOKE_USERS) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./...

.PHONY: ci
ci: ## What CI runs (.ci/run): lint, vuln, every fuzzer briefly, bench-smoke, then make test RACE=1
	bash .ci/run

.PHONY: docs
docs: ## Regenerate the command-line reference, docs/reference/*.md, from the cobra commands (a test fails when it drifts)
	$(GO) run ./internal/docgen/cmd -dir docs/reference

.PHONY: schema
schema: ## Regenerate migrations/current/schema.sql, the schema as the migrations leave it (pg_dump of a freshly migrated database; a test fails when it drifts)
	$(GO) test -count=1 -run '^TestSchemaFileIsTheMigratedSchema$$' ./migrations -args -write-schema

.PHONY: sql
sql: ## Regenerate each package's queries.gen.go, its statements typed from queries/*.sql on a freshly migrated database (a test fails when it drifts)
	$(GO) test -count=1 -run '^TestStatementsAreGenerated$$' ./internal/sqlfile -args -write

.PHONY: demo
demo: build ## Seed sample users in a throwaway database, run the jobs and deliver the messages
	$(GO) run ./internal/demo -bin $(BIN) $(DEMO_FLAGS)

.PHONY: console
# Not `go run`: go run exits 1 when interrupted, whatever its program does,
# and make would end Ctrl-C with "Error 1"; the demo exits 0 on Ctrl-C.
console: build ## Open the web console on the demo's database (loopback, no authentication; makes the demo's database first when missing); Ctrl-C stops it
	$(GO) build -o $(BIN)/demo ./internal/demo
	$(BIN)/demo -bin $(BIN) -console $(CONSOLE_ADDR) $(DEMO_FLAGS)

.PHONY: screenshots
screenshots: ## Retake the console's screenshots in docs/console/ (its browser tests, in Debian's Chromium)
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'InTheBrowser|Viewer' ./console

.PHONY: bench
bench: build ## Benchmarks (docs/BENCHMARKS.md): jobs vs single statements and per-user (BENCH_USERS=200000), queue vs River, the console's pages (CONSOLE_BENCH_USERS=1000000), scaling (BENCH_SIZES), pacing, chaos, PgBouncer vs direct (BENCH_SUITES)
	BENCH_USERS=$(BENCH_USERS) $(GO) test -run '^$$' -bench . -benchtime $(BENCH_ROUNDS)x -timeout 90m ./scheduler
	$(GO) test -run '^$$' -bench 'Queue|SendTimeChecks' -benchtime 2x -timeout 30m ./delivery
	$(GO) test -run '^$$' -bench 'SendBudget|SendPriorityAndCap|Wishes' -benchtime 6x -timeout 30m ./delivery
	BENCH_MESSAGES=5000000 $(GO) test -run '^$$' -bench 'Receipt' -benchtime 3x -timeout 30m ./activity
	$(GO) test -run '^$$' -bench 'WhatsAppWebhook' -benchtime 3x -timeout 10m ./console
	BENCH_USERS=$(CONSOLE_BENCH_USERS) CONSOLE_BENCH_PLANS=$(CURDIR)/bench/results/console-plans.txt $(GO) test -run '^$$' -bench Pages -benchtime 20x -timeout 60m ./console
	cd bench && $(GO) run . -bin ../$(BIN) -suites $(BENCH_SUITES) -sizes $(BENCH_SIZES) -messages $(BENCH_MESSAGES) -rounds $(BENCH_QUEUE_ROUNDS) -pooler-users $(BENCH_POOLER_USERS) -template-db '$(BENCH_TEMPLATE_DB)' -out results -plot ../docs/scaling.png

.PHONY: bench-full
bench-full: ## Every figure of docs/BENCHMARKS.md at 1,000,000 users (about 15 minutes; run it on a quiet machine)
	$(MAKE) bench BENCH_USERS=1000000 BENCH_ROUNDS=2 BENCH_SIZES=10000,100000,1000000

.PHONY: fuzz
fuzz: ## Run every fuzzer for FUZZTIME (50000x executions) each; findings land in testdata/fuzz
	@set -e; for dir in $$($(GO) list -f '{{.Dir}}' ./...); do \
	  for target in $$(cat $$dir/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do \
	    echo "$$target ($$dir)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

.PHONY: pg-stop
pg-stop: ## Stop the throwaway PostgreSQL the tests or the demo started, if any
	$(GO) run ./internal/testkit/pgtest/devdb --stop

.PHONY: services-stop
services-stop: ## Stop what the tests and the demo left running: the throwaway PostgreSQL and Redis, and the clusters and PgBouncers of killed test runs
	$(GO) run ./internal/testkit/localsvc/stop

.PHONY: clean
clean: ## Remove built binaries, and the test binaries make test keeps in the user's cache directory
	rm -rf $(BIN)
	$(GO) run ./internal/testkit/testrun -clean
