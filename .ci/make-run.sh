#!/usr/bin/env bash
# make run: hookd for the README's first five minutes, and the steps to
# follow. The settings are the demo's (DEMO_ENV) under yours (DEV_ENV),
# each read by the shell: a value with ; or spaces must be quoted there.
# The demo app is started only when HOOKD_FORWARD_URL is still the demo's;
# with your own app there, events go to it. HOOKD is the binary to run
# (./bin/hookd unless set); the steps always name ./bin/hookd, which is what
# you type. DEMO_DOWN, when set, takes the demo app down for that long from
# its first delivery.
set -euo pipefail
cd "$(dirname "$0")/.."
dev_env=${DEV_ENV:-.cache/dev.env}
demo_env=${DEMO_ENV:-.ci/demo.env}
hookd=${HOOKD:-./bin/hookd}

# A value with ; unquoted would run the rest of the line as a command.
if bad=$(grep -nE "^[A-Za-z_][A-Za-z0-9_]*=[^'\"].*;" "$dev_env"); then
  echo "$dev_env: quote a value that holds ;, e.g. STRIPE_WEBHOOK_SECRETS='account=whsec_a;connect=whsec_b' (line ${bad%%:*})" >&2
  exit 1
fi

# The demo app listens where the demo's own settings forward.
demo_url=$(sed -n 's/^HOOKD_FORWARD_URL=//p' "$demo_env")
# read sources a settings file by its path, relative or absolute.
read_settings() {
  # shellcheck disable=SC1090
  case $1 in /*) . "$1" ;; *) . "./${1#./}" ;; esac
}
set -a
read_settings "$demo_env"
read_settings "$dev_env"
set +a

port=${HOOKD_ADDR:-:8080}; port=${port##*:}; base="http://localhost:$port"
to=""; [ "$port" = 8080 ] || to=" -url $base/webhooks/stripe"
metrics=${HOOKD_METRICS_ADDR:-127.0.0.1:9090}
ports="$port hookd (HOOKD_ADDR)"
case $metrics in
  off) metrics="off (HOOKD_METRICS_ADDR)" ;;
  :*) ports="$ports, ${metrics##*:} metrics (HOOKD_METRICS_ADDR)"; metrics="http://localhost$metrics/metrics" ;;
  *) ports="$ports, ${metrics##*:} metrics (HOOKD_METRICS_ADDR)"; metrics="http://$metrics/metrics" ;;
esac
# Where the demo app listens: the host and port of the demo's URL.
demo_hostport=${demo_url#*://}; demo_hostport=${demo_hostport%%/*}
demo_host=${demo_hostport%:*}; demo_port=${demo_hostport##*:}

# endpointWith prints the first label HOOKD_ENDPOINTS gives setting
# (kind=thin, connect=true), or nothing.
endpointWith() {
  local part settings
  IFS=';' read -ra parts <<<"${HOOKD_ENDPOINTS:-}"
  for part in "${parts[@]}"; do
    settings=${part#*:}
    case ",${settings//[[:space:]]/}," in *",$1,"*) part=${part%%:*}; echo "${part//[[:space:]]/}"; return ;; esac
  done
}

# undeclared prints the first label of STRIPE_WEBHOOK_SECRETS that
# HOOKD_ENDPOINTS does not name, or nothing: such an endpoint learns its
# kind from what arrives, so a thin test event through it contradicts no
# declaration.
undeclared() {
  local part label named
  IFS=';' read -ra parts <<<"${STRIPE_WEBHOOK_SECRETS:-}"
  for part in "${parts[@]}"; do
    label=${part%%=*}; label=${label//[[:space:]]/}
    [ -n "$label" ] || continue
    named=false
    IFS=';' read -ra decls <<<"${HOOKD_ENDPOINTS:-}"
    for decl in "${decls[@]}"; do
      decl=${decl%%:*}
      [ "${decl//[[:space:]]/}" = "$label" ] && named=true
    done
    $named || { echo "$label"; return; }
  done
}

# How the steps' commands are signed: with the one secret, or with an
# endpoint of STRIPE_WEBHOOK_SECRETS named by -endpoint. Thin events, pings
# and generation-failure notices come only through a thin destination: they
# are signed with one (or with an endpoint that declares nothing), never
# with a snapshot endpoint's secret, which would contradict its
# declaration for as long as hookd remembers what arrived.
secret=${STRIPE_WEBHOOK_SECRET:-}
secrets=${STRIPE_WEBHOOK_SECRETS:-}
if [ -n "$secrets" ]; then
  sign="STRIPE_WEBHOOK_SECRETS='$secrets'"
  first=${secrets%%=*}; first=${first//[[:space:]]/}
  thin=$(endpointWith kind=thin); connect=$(endpointWith connect=true)
  [ -n "$thin" ] || thin=$(undeclared)
  [ -n "$connect" ] || connect=$(undeclared)
  as=" -endpoint $first"
  asThin=""; [ -z "$thin" ] || asThin=" -endpoint $thin"
  asConnect=""; [ -z "$connect" ] || asConnect=" -endpoint $connect"
elif [ -n "$secret" ]; then
  sign="STRIPE_WEBHOOK_SECRET=$secret"
  as=""; asThin=""; asConnect=""; thin=default; connect=default
else
  echo "$dev_env: set STRIPE_WEBHOOK_SECRET=whsec_... (one endpoint) or STRIPE_WEBHOOK_SECRETS='label=whsec_...;...' (several)" >&2
  exit 1
fi

demo=false
if [ "${HOOKD_PROCESSOR:-forward}" = forward ] && [ "${HOOKD_FORWARD_URL:-}" = "$demo_url" ]; then
  demo=true
  ports="$ports, $demo_port the demo app ($demo_env's HOOKD_FORWARD_URL)"
  # With another program on the demo's port, the demo app cannot listen
  # and hookd would forward the demo's events to that program: stop.
  if (exec 3<>"/dev/tcp/$demo_host/$demo_port") 2>/dev/null; then
    echo "make run: another program listens on $demo_hostport, where the demo app would, and hookd would" >&2
    echo "forward the demo's events to it. Stop that program (ss -ltnp 'sport = :$demo_port' names it)," >&2
    echo "or set HOOKD_FORWARD_URL in $dev_env to your own app, and run make run again." >&2
    exit 1
  fi
  "$hookd" demo-app ${DEMO_DOWN:+-down "$DEMO_DOWN"} &
  demo_pid=$!
  trap 'kill "$demo_pid" 2>/dev/null || true' EXIT
fi

echo
if $demo; then
  echo "hookd is starting on $base, forwarding every event to a demo app"
  echo "($HOOKD_FORWARD_URL) that takes most of them and fails some on purpose:"
  echo "a 500 while its Redis is down, a timeout, and a 422 for every customer.subscription.updated."
elif [ "${HOOKD_PROCESSOR:-forward}" = forward ]; then
  echo "hookd is starting on $base, forwarding every event to $HOOKD_FORWARD_URL"
  echo "(HOOKD_FORWARD_URL in $dev_env): your app. The demo app is not started; the events' fate is your app's answers."
else
  echo "hookd is starting on $base with HOOKD_PROCESSOR=$HOOKD_PROCESSOR: no event is forwarded, and the demo app is not started."
fi
if [ "${HOOKD_DEMO_BACKOFF:-}" = true ]; then
  echo "Demo backoff: retries wait seconds, not hours."
fi
echo

n=0
# step prints the next numbered step's first line.
step() { n=$((n + 1)); echo "  $n. $1"; }

# The account HOOKD_ADMIN_EMAIL names may exist already, made by another
# clone on this database with another password: say so rather than print
# a password that will not sign in.
if [ -z "${HOOKD_ADMIN_EMAIL:-}" ]; then
  step "Open $base/ and sign in with an account: DATABASE_URL=$DATABASE_URL ./bin/hookd user add EMAIL -role admin"
elif answer=$(printf '%s\n' "${HOOKD_ADMIN_PASSWORD:-}" | "$hookd" user check "$HOOKD_ADMIN_EMAIL" 2>&1); then
  step "Open $base/ and sign in as $HOOKD_ADMIN_EMAIL, password ${HOOKD_ADMIN_PASSWORD:-}"
else
  case $answer in
    *"no account for"*)
      step "Open $base/ and sign in as $HOOKD_ADMIN_EMAIL, password ${HOOKD_ADMIN_PASSWORD:-}" ;;
    *"password is another"*)
      step "Open $base/ and sign in as $HOOKD_ADMIN_EMAIL. That account exists already in this database (another"
      echo "     clone made it?) with its own password, not the one in $dev_env. To set it, run and type a new one:"
      echo "       DATABASE_URL=$DATABASE_URL ./bin/hookd user passwd $HOOKD_ADMIN_EMAIL" ;;
    *)
      echo "$answer" >&2
      exit 1 ;;
  esac
fi
step "From another terminal in this folder, send 50 signed Stripe events:"
echo "       $sign ./bin/hookd send-test-event -n 50$as$to"
if $demo; then
  step "Watch the overview: most events are processed at once; the failed ones wait on"
  echo "     Pending with their errors and are retried within seconds."
  step "About 30 seconds later the customer.subscription.updated events are Dead."
  echo "     Open one and press Retry: the demo app takes it this time, and it is processed."
else
  step "Watch the overview: what your app takes is processed; what it refuses waits on Pending with its error."
fi
step "What Stripe sends besides:"
if [ -n "$thin" ]; then
  echo "     a thin event, a destination's ping, and the notice of an event Stripe could not"
  echo "     generate (listed on Failures):"
  echo "       ./bin/hookd send-test-event -thin$asThin$to;  ./bin/hookd send-test-event -ping$asThin$to"
  echo "       ./bin/hookd send-test-event -generation-failure$asThin$to"
else
  echo "     thin events, a destination's ping and the notice of an event Stripe could not generate"
  echo "     come through a thin destination: add one to STRIPE_WEBHOOK_SECRETS and declare it"
  echo "     kind=thin in HOOKD_ENDPOINTS to send them."
fi
if [ -n "$connect" ]; then
  echo "     a connected account's event:"
  echo "       ./bin/hookd send-test-event -account acct_1Demo$asConnect$to"
else
  echo "     a connected account's event comes through a Connect endpoint: declare one connect=true"
  echo "     in HOOKD_ENDPOINTS to send it."
fi
echo "     (each with $sign as above)"
if $demo; then
  step "Take the demo app down for a minute and send 50 more: the circuit breaker opens,"
  echo "     the banner says so, and a probe closes it once the app is back:"
  echo "       HOOKD_FORWARD_URL=$HOOKD_FORWARD_URL HOOKD_FORWARD_SECRET=${HOOKD_FORWARD_SECRET:-} \\"
  echo "       $sign ./bin/hookd send-test-event -outage 60s -n 50$as$to"
  echo "     (or start with make run DEMO_DOWN=60s: down for a minute from its first delivery)"
fi
echo
echo "  add people: DATABASE_URL=$DATABASE_URL ./bin/hookd user add EMAIL -role operator"
echo "  health:     $base/healthz   metrics: $metrics"
echo "  ports:      $ports"
echo "  settings:   $dev_env (yours, kept out of git) over $demo_env (the demo's)"
echo
"$hookd" serve
