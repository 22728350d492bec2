# The two commands of the README:
#   make run    set up a local PostgreSQL, build hookd and run it
#   make test   set up PostgreSQL, Chromium and the Playwright driver, then run every check and test
# Both are idempotent: a second run only rebuilds and reruns.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Go lives in /usr/local/go on these machines, which a non-login shell may not
# have on its PATH.
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

DEV_DATABASE_URL  ?= postgres://postgres:postgres@127.0.0.1:5432/hookd?sslmode=disable
TEST_DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
PLAYWRIGHT_DRIVER_PATH ?= $(HOME)/.cache/hookd/playwright-driver-1.64.1
export TEST_DATABASE_URL PLAYWRIGHT_DRIVER_PATH

# Local settings for `make run` (a signing secret and the first admin's
# password), made once and kept out of git.
DEV_ENV := .cache/dev.env

.PHONY: run test db browser build check bench bench-load
.DEFAULT_GOAL := run

db:
	@bash .ci/postgres.sh hookd

browser:
	@bash .ci/browser.sh

build:
	CGO_ENABLED=0 go build -trimpath -o bin/hookd .

$(DEV_ENV):
	@mkdir -p $(dir $@)
	@umask 077; { \
	  echo "STRIPE_WEBHOOK_SECRET=whsec_$$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"; \
	  echo "HOOKD_ADMIN_EMAIL=admin@localhost"; \
	  echo "HOOKD_ADMIN_PASSWORD=$$(head -c 12 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"; \
	} > $@

run: db build $(DEV_ENV)
	@set -a; . ./$(DEV_ENV); set +a; \
	echo; \
	echo "hookd is starting on http://localhost:8080"; \
	echo "  dashboard:  http://localhost:8080/  (sign in as $$HOOKD_ADMIN_EMAIL, password $$HOOKD_ADMIN_PASSWORD)"; \
	echo "  add people: DATABASE_URL=$(DEV_DATABASE_URL) ./bin/hookd user add EMAIL -role operator"; \
	echo "  health:     http://localhost:8080/healthz   metrics: http://localhost:8080/metrics"; \
	echo "  send a signed test event from another terminal:"; \
	echo "    STRIPE_WEBHOOK_SECRET=$$STRIPE_WEBHOOK_SECRET ./bin/hookd send-test-event -type invoice.paid"; \
	echo "  settings for this local run are in $(DEV_ENV)"; \
	echo "  processor:  HOOKD_PROCESSOR=discard, chosen for this trial run: each event is accepted and"; \
	echo "              marked processed without reaching any app (run ./bin/hookd serve with"; \
	echo "              HOOKD_FORWARD_URL set to forward events to your app)"; \
	echo; \
	DATABASE_URL="$${DATABASE_URL:-$(DEV_DATABASE_URL)}" HOOKD_PROCESSOR=discard exec ./bin/hookd serve

# Static checks first: they are cheap and say most precisely what is wrong.
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ\.go$$')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...
	@bash .ci/migrations.sh
	go tool staticcheck ./...
	@go tool templ fmt -fail views >/dev/null 2>&1 || { echo "views: templ fmt would change the .templ files (run: go tool templ fmt views)"; exit 1; }
	@go tool templ generate >/dev/null 2>&1 && git diff --exit-code --stat -- views || \
	  { echo "views: templ generate changed the committed *_templ.go files"; exit 1; }

test: db browser check
	go test -race -count=1 -timeout 20m ./...

# Benchmarks, for comparing with benchstat; not part of `make test`.
bench: db
	go test -run '^$$' -bench . -benchmem -count 6 ./queue/ ./worker/

# The built binary under load from outside (.ci/bench/README.md): the
# receiver interleaved with pgbench running its bare SQL, then the retry
# loop draining a backlog to an HTTP sink. LOADGEN_FLAGS passes options,
# e.g. LOADGEN_FLAGS='-rounds 5 -drain=false'.
LOADGEN_FLAGS ?=
bench-load: db build
	@command -v pgbench >/dev/null 2>&1 || { \
	  echo "pgbench: not installed, installing postgresql-contrib with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-contrib >/dev/null; }
	go build -o bin/loadgen ./e2e/loadgen
	./bin/loadgen -hookd bin/hookd -server '$(TEST_DATABASE_URL)' -sql .ci/bench $(LOADGEN_FLAGS)
