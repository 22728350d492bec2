#!/usr/bin/env bash
# Makes sure a local PostgreSQL is running and reachable the way the Makefile
# expects: 127.0.0.1:5432, role postgres with password postgres, and a database
# named by $1 (default hookd). Idempotent: a second run changes nothing.
# A password role postgres already has is never changed: with another one,
# or with DATABASE_URL set to a role of your own, you say which to use.
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

# Password login over TCP is what the Go code uses (DATABASE_URL,
# TEST_DATABASE_URL): role postgres, password postgres, unless DATABASE_URL
# names your own. A role with no password is given that one, and told; a
# role with another password keeps it, and make stops saying what to do,
# since whatever else signs in with it would stop working.
if [ -z "${DATABASE_URL:-}" ] &&
  ! PGPASSWORD=postgres psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAqc 'SELECT 1' >/dev/null 2>&1; then
  nopassword=$(as_postgres psql -p "$port" -tAc "SELECT rolpassword IS NULL FROM pg_authid WHERE rolname = 'postgres'")
  if [ "$nopassword" != t ]; then
    cat >&2 <<EOF2
postgres: cannot sign in as role postgres with password postgres on 127.0.0.1:$port.
The role has another password (or pg_hba.conf refuses password login there), and make leaves it as it is.
Either name a role of yours:
  make run DATABASE_URL='postgres://USER:PASSWORD@127.0.0.1:$port/$db?sslmode=disable'
or give role postgres the password the Makefile expects (whatever signs in with the old one will stop working):
  sudo -u postgres psql -p $port -c "ALTER ROLE postgres PASSWORD 'postgres'"
EOF2
    exit 1
  fi
  as_postgres psql -q -p "$port" -v ON_ERROR_STOP=1 -c "ALTER ROLE postgres PASSWORD 'postgres'" >/dev/null
  echo "postgres: role postgres had no password: set it to postgres, for password login over TCP on 127.0.0.1:$port"
fi
if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  as_postgres createdb -p "$port" "$db"
  echo "postgres: created database $db"
fi
