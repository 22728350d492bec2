#!/usr/bin/env bash
# Makes sure the end-to-end tests can sign in through a real OpenID
# provider: .ci/oidc-provider, ZITADEL's example provider (the example
# server of github.com/zitadel/oidc, with a login form and fixed users)
# extended with a groups claim the test changes, a sign-in session and
# RP-initiated logout that ends it. It is built into a folder of its own,
# from which e2e/oidc_test.go runs it, again whenever its source changes.
# Idempotent: a second run changes nothing and prints nothing.
set -euo pipefail
cd "$(dirname "$0")/oidc-provider"

dir="${HOOKD_E2E_OIDC_PROVIDER_DIR:-$HOME/.cache/hookd/oidc-provider}"
sum=$(cat go.mod go.sum main.go | sha256sum | cut -d' ' -f1)

if [ ! -x "$dir/hookd-oidc-provider" ] || [ "$(cat "$dir/source.sha256" 2>/dev/null)" != "$sum" ]; then
  echo "oidc-provider: building the end-to-end tests' OpenID provider (.ci/oidc-provider)"
  mkdir -p "$dir"
  go build -o "$dir/hookd-oidc-provider" .
  echo "$sum" > "$dir/source.sha256"
fi
