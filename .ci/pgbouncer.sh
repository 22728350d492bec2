#!/usr/bin/env bash
# Makes sure a PgBouncer in transaction pooling mode runs in front of the
# local PostgreSQL (.ci/postgres.sh must have run), the way the Makefile
# expects: 127.0.0.1:6432, role postgres with password postgres, every
# database of the server reachable by its own name, so each test's fresh
# database is too. hookd runs behind such a pooler in production, and the
# tests that use it (queuetest.PgBouncerURL) prove it still works there.
#
# Debian's pgbouncer package is installed if missing. PgBouncer runs as the
# postgres user, from a config under that user's cache directory; no service
# manager is involved. Idempotent: a second run changes nothing and prints
# nothing; a changed config is reloaded.
set -euo pipefail

listen_port=6432

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { as_root runuser -u postgres -- "$@"; }

pgbouncer=/usr/sbin/pgbouncer
if [ ! -x "$pgbouncer" ]; then
  echo "pgbouncer: not installed, installing with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
  # The package starts a pgbouncer of its own where a service manager lets
  # it, with no databases, on the port these tests need: stop and disable
  # it. Ours is the only one the tests talk to.
  if [ -d /run/systemd/system ]; then
    as_root systemctl disable --now pgbouncer.service pgbouncer.socket >/dev/null 2>&1 || true
  else
    as_root invoke-rc.d pgbouncer stop >/dev/null 2>&1 || true
    as_root update-rc.d pgbouncer disable >/dev/null 2>&1 || true
  fi
fi

# The PostgreSQL that .ci/postgres.sh runs, and where it listens.
read -r _ _ pg_port pg_status _ < <(pg_lsclusters -h | head -1)
if [ "$pg_status" != online ]; then
  echo "pgbouncer: PostgreSQL is not running; run .ci/postgres.sh (make db) first" >&2
  exit 1
fi

home=$(getent passwd postgres | cut -d: -f6)
dir="$home/.cache/hookd/pgbouncer"
as_postgres mkdir -p "$dir"
as_postgres chmod 700 "$dir"

# transaction pooling: a server connection belongs to a client for one
# transaction only, as in production. Every database name goes to the local
# server (the * entry), so a test's fresh database needs no config change.
# The pools are per database, so 20 server connections each leaves room for
# the rest of PostgreSQL's 100 while tests run in parallel, and an idle one
# is closed soon after its test is done.
config="[databases]
* = host=127.0.0.1 port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $listen_port
unix_socket_dir =
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 2000
server_idle_timeout = 10
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
"
# The password in the clear, so PgBouncer can log in to PostgreSQL with
# SCRAM too; it is the well-known local one of .ci/postgres.sh.
userlist='"postgres" "postgres"
'

changed=false
write() { # file content: replace file when its content differs
  if [ "$(as_postgres cat "$1" 2>/dev/null)" != "${2%$'\n'}" ]; then
    printf '%s' "$2" | as_postgres tee "$1" >/dev/null
    changed=true
  fi
}
write "$dir/pgbouncer.ini" "$config"
write "$dir/userlist.txt" "$userlist"

running() { # pid: is it a live pgbouncer (not one killed and not yet reaped)?
  [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = pgbouncer ] &&
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
pid=$(as_postgres cat "$dir/pgbouncer.pid" 2>/dev/null || true)
if running "$pid"; then
  if [ "$changed" = true ]; then
    echo "pgbouncer: config changed, reloading"
    as_root kill -HUP "$pid"
  fi
else
  as_postgres rm -f "$dir/pgbouncer.pid"
  if (exec 3<>"/dev/tcp/127.0.0.1/$listen_port") 2>/dev/null; then
    echo "pgbouncer: something else listens on 127.0.0.1:$listen_port; stop it (e.g. Debian's own pgbouncer service) and run this again" >&2
    exit 1
  fi
  echo "pgbouncer: starting on 127.0.0.1:$listen_port, transaction pooling, in front of port $pg_port"
  # Each client connection is a file descriptor: raise the soft limit
  # (often 1024) towards max_client_conn, as far as the hard one allows.
  as_postgres bash -c 'h=$(ulimit -Hn); [ "$h" = unlimited ] && h=4096
    ulimit -Sn $((h < 4096 ? h : 4096)); exec "$0" -d -q "$1"' "$pgbouncer" "$dir/pgbouncer.ini"
fi

# Through PgBouncer, with a password, as the tests connect.
for _ in $(seq 1 50); do
  PGPASSWORD=postgres psql -h 127.0.0.1 -p "$listen_port" -U postgres -d postgres -tAc 'SELECT 1' >/dev/null 2>&1 && exit 0
  sleep 0.2
done
echo "pgbouncer: no answer through 127.0.0.1:$listen_port; see $dir/pgbouncer.log" >&2
exit 1
