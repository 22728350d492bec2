#!/bin/sh
# Measures the receiver against its database ceiling on the same server:
#   .ci/bench/receiver.sh [rounds]   (default 6)
# Each round runs pgbench with receiver.sql (the database work of one
# delivery: lock, dedup read, marker insert, commit) for 10 s, then
# BenchmarkReceiverHTTP for 5 s, both with 16 clients, so both see the same
# machine load. pgbench's figure is printed as a benchmark line
# (BenchmarkPgbenchReceiver) so benchstat summarizes both:
#   .ci/bench/receiver.sh > receiver.txt && benchstat receiver.txt
# The server is TEST_DATABASE_URL's (default: the local test server).
set -eu
cd "$(dirname "$0")/../.."
server=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable}
db=hookd_bench_pgbench_$$
bench_url=$(printf '%s' "$server" | sed "s#/[^/?]*\(?\|\$\)#/$db\1#")
tmp=$(mktemp -d)

psql -q "$server" -c "CREATE DATABASE $db"
trap 'psql -q "$server" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; rm -rf "$tmp"' EXIT
DATABASE_URL=$bench_url go run . migrate >/dev/null
go test -c -o "$tmp/web.test" ./web/

for _ in $(seq "${1:-6}"); do
	pgbench -n -c 16 -j 2 -T 10 -f .ci/bench/receiver.sql "$bench_url" >"$tmp/pgbench.txt"
	awk '/^latency average/ { lat = $4 } /^tps/ { tps = $3 }
		END { printf "BenchmarkPgbenchReceiver-2\t1\t%s tx/s\t%s avg-ms\n", tps, lat }' "$tmp/pgbench.txt"
	(cd web && "$tmp/web.test" -test.run '^$' -test.bench BenchmarkReceiverHTTP -test.benchtime 5s) |
		grep '^Benchmark'
done
