#!/usr/bin/env bash
# Makes sure the trace test (main_traces_test.go) has a real trace backend:
# Jaeger, all in one process with in-memory storage, taking OTLP over HTTP
# on 127.0.0.1:4318 and answering its query API on 127.0.0.1:16686. It is
# built once from .ci/jaeger, a module of its own that pins the version
# (`go install ...@version` refuses Jaeger: its go.mod has a replace
# directive), into a folder of its own; the build takes a long while (a
# 120 MB binary), so it is skipped whenever the pinned binary is there.
# Idempotent: a second run, with Jaeger answering, changes nothing and
# prints nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.76.0 # .ci/jaeger/go.mod requires the same
dir="${HOOKD_JAEGER_DIR:-$HOME/.cache/hookd/jaeger-$version}"
query=http://127.0.0.1:16686

if [ ! -x "$dir/jaeger" ]; then
  echo "jaeger: building Jaeger $version from .ci/jaeger, once (it takes minutes)"
  mkdir -p "$dir"
  (cd .ci/jaeger && go build -trimpath -o "$dir/jaeger.new" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$dir/jaeger.new" "$dir/jaeger"
fi

answers() { curl -fsS -o /dev/null --max-time 2 "$query/api/services"; }
if answers 2>/dev/null; then
  exit 0
fi
# Without a config Jaeger runs all in one, in memory, on its default
# ports. It outlives this script, as the PostgreSQL of .ci/postgres.sh does.
nohup "$dir/jaeger" >"$dir/jaeger.log" 2>&1 &
for _ in $(seq 150); do
  if answers 2>/dev/null; then
    echo "jaeger: running (OTLP on 127.0.0.1:4318, query on $query), log in $dir/jaeger.log"
    exit 0
  fi
  sleep 0.2
done
echo "jaeger: not answering on $query after 30 s; its log, $dir/jaeger.log, ends:" >&2
tail -20 "$dir/jaeger.log" >&2
exit 1
