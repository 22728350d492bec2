#!/bin/sh
# Runs the receiver's pgbench ceiling and BenchmarkReceiverHTTP back to back
# on the same server, so the two figures are comparable:
#   .ci/bench/receiver.sh [count]
# The server is TEST_DATABASE_URL's (default: the local test server).
set -eu
cd "$(dirname "$0")/../.."
server=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable}
db=hookd_bench_pgbench_$$
bench_url=$(printf '%s' "$server" | sed "s#/[^/?]*\(?\|\$\)#/$db\1#")

psql -q "$server" -c "CREATE DATABASE $db"
trap 'psql -q "$server" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
DATABASE_URL=$bench_url go run . migrate >/dev/null

echo "== pgbench: lock, dedup read, marker insert, commit (16 clients, 20 s)"
pgbench -n -c 16 -j 2 -T 20 -f .ci/bench/receiver.sql "$bench_url" | grep -E 'tps|latency'

echo "== BenchmarkReceiverHTTP: 16 clients over HTTP"
go test -run '^$' -bench BenchmarkReceiverHTTP -benchtime 5s -count "${1:-6}" ./web/
