# The two commands of the README:
#   make run    set up a local PostgreSQL, build hookd and run it
#   make test   set up PostgreSQL, PgBouncer, Chromium, the Playwright driver, stripe-mock, an OpenID provider and Jaeger, then run every check and test
# Both are idempotent: a second run only rebuilds and reruns.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Go lives in /usr/local/go on these machines, which a non-login shell may not
# have on its PATH.
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

DEV_DATABASE_URL  ?= postgres://postgres:postgres@127.0.0.1:5432/hookd?sslmode=disable
TEST_DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
# PgBouncer in transaction pooling mode in front of that server (make
# pgbouncer); tests reach their own databases through it by name.
TEST_PGBOUNCER_URL ?= postgres://postgres:postgres@127.0.0.1:6432/postgres?sslmode=disable
PLAYWRIGHT_DRIVER_PATH ?= $(HOME)/.cache/hookd/playwright-driver-1.64.1
export TEST_DATABASE_URL TEST_PGBOUNCER_URL PLAYWRIGHT_DRIVER_PATH

# Local settings for `make run` (a signing secret, the key hookd signs
# forwarded events with, and the first admin's password), made once and kept
# out of git. Values set here win over the demo's.
DEV_ENV := .cache/dev.env
# The demo `make run` tells: hookd forwards to `hookd demo-app`, which fails
# some events on purpose, and retries wait seconds instead of hours.
# `make run DEMO_DOWN=60s` has the app down for a minute from its first
# delivery, which opens the circuit breaker and, once a probe finds the app
# back, closes it.
DEMO_ENV := .ci/demo.env

.PHONY: run test docs api db pgbouncer browser stripe-mock oidc-provider jaeger build check bench bench-load
.DEFAULT_GOAL := run

db:
	@bash .ci/postgres.sh hookd

pgbouncer: db
	@bash .ci/pgbouncer.sh

browser:
	@bash .ci/browser.sh

# Stripe's own mock of its API, which checks each v1 request hookd makes
# against Stripe's OpenAPI spec (internal/stripeapi's tests run it).
STRIPE_MOCK_VERSION := v0.203.0
stripe-mock:
	@[ -x "$$(go env GOPATH)/bin/stripe-mock" ] || go install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

# The OpenID provider the end-to-end tests sign in through (ZITADEL's
# example provider, extended in .ci/oidc-provider; e2e/oidc_test.go).
oidc-provider:
	@bash .ci/oidc-provider.sh

# Jaeger, the trace backend main_traces_test.go reads hookd's traces back
# from: built once from .ci/jaeger (pinned there); each test starts one of
# its own and stops it.
jaeger:
	@bash .ci/jaeger.sh

build:
	CGO_ENABLED=0 go build -trimpath -o bin/hookd .

$(DEV_ENV):
	@mkdir -p $(dir $@)
	@umask 077; { \
	  echo "# make run reads this file with the shell: quote a value that holds ; or spaces,"; \
	  echo "# e.g. STRIPE_WEBHOOK_SECRETS='account=whsec_a;connect=whsec_b' (in place of STRIPE_WEBHOOK_SECRET)."; \
	  echo "STRIPE_WEBHOOK_SECRET=whsec_$$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"; \
	  echo "HOOKD_ADMIN_EMAIL=admin@localhost"; \
	  echo "HOOKD_ADMIN_PASSWORD=$$(head -c 12 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"; \
	} > $@

# The demo app runs in the background for as long as hookd runs; Ctrl-C
# stops both. .ci/make-run.sh reads the settings, starts the demo app when
# HOOKD_FORWARD_URL is still the demo's, and prints the steps.
run: db build $(DEV_ENV)
	@grep -q '^HOOKD_FORWARD_SECRET=' $(DEV_ENV) || \
	  echo "HOOKD_FORWARD_SECRET=whsec_$$(head -c 24 /dev/urandom | base64)" >> $(DEV_ENV)
	@DATABASE_URL="$${DATABASE_URL:-$(DEV_DATABASE_URL)}" DEV_ENV=$(DEV_ENV) DEMO_ENV=$(DEMO_ENV) DEMO_DOWN=$(DEMO_DOWN) \
	  bash .ci/make-run.sh

# The settings tables of README.md and docs/configuration.md, rendered from
# hookd's settings table (internal/config/docs.go).
docs:
	go test ./internal/config -run TestDocs_TablesAreGenerated -update

# /api/v1's generated server (web/api/api.gen.go), its Go client
# (web/api/apiclient, which the hookd command line uses) and the JSON
# document it serves (web/api/openapi.json), all from web/api/openapi.yaml.
api:
	go generate ./web/api/...
	go test ./web/api -run TestDocument_CommittedJSONIsTheYAML -update

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
	@$(MAKE) -s api >/dev/null && git diff --exit-code --stat -- web/api || \
	  { echo "web/api: make api changed the committed api.gen.go, apiclient.gen.go or openapi.json (run: make api)"; exit 1; }

test: db pgbouncer browser stripe-mock oidc-provider jaeger check
	go test -race -count=1 -timeout 20m ./...

# Benchmarks, for comparing with benchstat; not part of `make test`.
bench: db
	go test -run '^$$' -bench . -benchmem -count 6 ./queue/ ./worker/ ./internal/receiver/

# The built binary under load from outside (.ci/bench/README.md): the
# receiver taking turns with the seed's handler written plainly in Go, then
# the retry loop draining a backlog to an HTTP sink, taking turns with a
# River burn-down (.ci/bench/river, a module of its own: River is never a
# dependency of hookd). LOADGEN_FLAGS passes options,
# e.g. LOADGEN_FLAGS='-rounds 5 -drain=false'.
LOADGEN_FLAGS ?=
bench-load: db build
	go build -o bin/loadgen ./e2e/loadgen
	go build -o bin/plainseed ./e2e/loadgen/plainseed
	cd .ci/bench/river && go build -o ../../../bin/riverbench .
	./bin/loadgen -hookd bin/hookd -plain bin/plainseed -river bin/riverbench -server '$(TEST_DATABASE_URL)' $(LOADGEN_FLAGS)
