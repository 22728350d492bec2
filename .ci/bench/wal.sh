#!/usr/bin/env bash
# WAL per delivery: what one fresh delivery writes to PostgreSQL's WAL
# (lease, outcome and release), counted by pg_waldump over the range the
# deliveries ran in, keeping only the transactions that touched hookd's
# database (the server may be busy with others). A redelivery of a handled
# event writes nothing (queue's TestTakeDeliveries_RedeliveryOfAHandledEventWritesNothing).
# Usage:
#   .ci/bench/wal.sh [bin/hookd] [events]
# Needs the local server of `make db` and read access to its pg_wal (root,
# or the postgres user).
set -euo pipefail
cd "$(dirname "$0")/../.."

hookd="${1:-bin/hookd}"
n="${2:-1000}"
server="${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable}"
db="hookd_wal_$$"
secret="whsec_walbench$$"
port=$((20000 + $$ % 10000))

psql_() { psql "$server" -qAtX "$@"; }
psql_ -c "CREATE DATABASE $db"
dburl="${server/\/postgres\?/\/$db?}"
logs=$(mktemp)
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  psql_ -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  rm -f "$logs"
}
trap cleanup EXIT

DATABASE_URL="$dburl" STRIPE_WEBHOOK_SECRET="$secret" HOOKD_PROCESSOR=discard HOOKD_ADDR="127.0.0.1:$port" \
  HOOKD_METRICS_ADDR=off "$hookd" serve >"$logs" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done

oid=$(psql_ -c "SELECT oid FROM pg_database WHERE datname = '$db'")
datadir=$(psql_ -c "SHOW data_directory")
waldump=$(ls /usr/lib/postgresql/*/bin/pg_waldump 2>/dev/null | sort -V | tail -1)
waldump=${waldump:-pg_waldump}

# measure LABEL: runs the events' deliveries between two WAL positions and
# prints what the transactions of hookd's database wrote, per event.
measure() {
  local label=$1
  shift
  psql_ -c "CHECKPOINT" >/dev/null
  local start end
  start=$(psql_ -c "SELECT pg_current_wal_insert_lsn()")
  "$@" >"$logs.send" 2>&1 || { cat "$logs.send" "$logs"; exit 1; }
  rm -f "$logs.send"
  # Everything hookd wrote for them is committed before the answers.
  end=$(psql_ -c "SELECT pg_current_wal_insert_lsn()")
  # pg_waldump reads what is on disk: wait for the flush to pass the end.
  until [ "$(psql_ -c "SELECT pg_current_wal_flush_lsn() >= '$end'")" = t ]; do sleep 0.2; done
  "$waldump" -p "$datadir/pg_wal" -s "$start" -e "$end" 2>/dev/null | tee "${WAL_DUMP:-/dev/null}" | awk -v oid="$oid" -v n="$n" -v label="$label" '
    {
      # rmgr: Heap len (rec/tot): 54/ 54, tx: 1234, lsn: ..., desc: ... rel 1663/OID/...
      match($0, /tx: +[0-9]+/); tx = substr($0, RSTART + 4, RLENGTH - 4) + 0
      match($0, /len \(rec\/tot\): +[0-9]+\/ *[0-9]+/); s = substr($0, RSTART, RLENGTH); sub(/.*\/ */, "", s)
      bytes[tx] += s; recs[tx]++
      if ($0 ~ ("rel [0-9]+/" oid "/")) mine[tx] = 1
      else if ($0 ~ /rel [0-9]+\//) other[tx] = 1
      if ($0 ~ /COMMIT/) commits[tx]++
    }
    END {
      # A transaction that wrote only unlogged rows (a lease) leaves just
      # its commit record, which names no database: counted apart, and
      # hookd'"'"'s only when the server runs nothing else.
      for (tx in bytes) {
        if (tx == 0) continue
        if (tx in mine) { b += bytes[tx]; r += recs[tx]; c += commits[tx]; t++ }
        else if (!(tx in other)) { ub += bytes[tx]; uc += commits[tx] }
      }
      printf "%s: %d events, %d transactions, %d commits; per event: %.1f WAL records, %.2f commits, %.0f bytes; " \
        "besides, %d commit-only transactions of no database, %.0f bytes per event\n",
        label, n, t, c, r / n, c / n, b / n, uc, ub / n
    }'
}

export STRIPE_WEBHOOK_SECRET="$secret"
url="http://127.0.0.1:$port/webhooks/stripe"
measure "fresh deliveries" "$hookd" send-test-event -n "$n" -url "$url"
psql "$dburl" -qAtX -c "SELECT 'the markers keep ' || round(avg(length(payload))) || ' bytes of compressed payload each (of ' ||
  round(avg(length(convert_from(payload, 'UTF8')))) || ' sent)' FROM processed_webhook_events" 2>/dev/null ||
  psql "$dburl" -qAtX -c "SELECT 'the markers keep ' || coalesce(round(avg(length(payload))), 0) || ' bytes of compressed payload each' FROM processed_webhook_events"
