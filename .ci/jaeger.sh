#!/usr/bin/env bash
# Makes sure the trace test (main_traces_test.go) has a real trace backend:
# Jaeger all in one, built once from .ci/jaeger, a module of its own that
# pins the version (`go install ...@version` refuses Jaeger: its go.mod has
# a replace directive). Jaeger's module leaves its UI out (its releases
# build the UI from a repository of its own, which no package registry
# serves), so the Jaeger here answers the query API the tests read, and
# its UI is the placeholder page.
#
# Nothing is started here: each test starts a Jaeger of its own on free
# ports (e2e/e2etest's StartJaeger) and stops it when it ends. The build
# takes minutes (a 120 MB binary), so it is skipped whenever the pinned
# binary is there. Idempotent: a second run changes nothing and prints
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.76.0 # .ci/jaeger/go.mod and e2e/e2etest's JaegerVersion name the same
dir="${HOOKD_JAEGER_DIR:-$HOME/.cache/hookd/jaeger-$version}"

if [ ! -x "$dir/jaeger" ]; then
  echo "jaeger: building Jaeger $version from .ci/jaeger, once (it takes minutes)"
  mkdir -p "$dir"
  (cd .ci/jaeger && go build -trimpath -o "$dir/jaeger.new" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$dir/jaeger.new" "$dir/jaeger"
fi
