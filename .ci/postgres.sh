#!/usr/bin/env bash
# Makes sure a local PostgreSQL is running and reachable the way the Makefile
# expects: 127.0.0.1:5432, role postgres with password postgres, and a database
# named by $1 (default hookd). Idempotent: a second run changes nothing.
set -euo pipefail

db="${1:-hookd}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { as_root runuser -u postgres -- "$@"; }

if ! command -v pg_lsclusters >/dev/null 2>&1; then
  echo "postgres: not installed, installing with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if [ -z "$(pg_lsclusters -h)" ]; then
  version=$(ls /usr/lib/postgresql | sort -V | tail -1)
  echo "postgres: no cluster, creating $version/main"
  as_root pg_createcluster "$version" main >/dev/null
fi

read -r version cluster port status _ < <(pg_lsclusters -h | head -1)
if [ "$status" != online ]; then
  echo "postgres: starting cluster $version/$cluster on port $port"
  as_root pg_ctlcluster "$version" "$cluster" start
fi

for _ in $(seq 1 50); do
  as_postgres pg_isready -q -p "$port" && break
  sleep 0.2
done

# Password login over TCP is what the Go code uses (DATABASE_URL, TEST_DATABASE_URL).
as_postgres psql -q -p "$port" -v ON_ERROR_STOP=1 -c "ALTER ROLE postgres PASSWORD 'postgres'" >/dev/null
if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  as_postgres createdb -p "$port" "$db"
  echo "postgres: created database $db"
fi
