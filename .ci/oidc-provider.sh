#!/usr/bin/env bash
# Makes sure the end-to-end tests can sign in through a real OpenID
# provider: the example provider of github.com/zitadel/oidc (its
# example/server, with a login form and fixed users), built with
# `go install` into a folder of its own, as its binary is named just
# "server". e2e/oidc_test.go runs it from there. Idempotent: a second run
# changes nothing and prints nothing.
set -euo pipefail

version=v3.52.0 # e2e/oidc_test.go's oidcProviderVersion names the same
dir="${HOOKD_E2E_OIDC_PROVIDER_DIR:-$HOME/.cache/hookd/zitadel-oidc-op-$version}"

if [ ! -x "$dir/server" ]; then
  echo "oidc-provider: building ZITADEL's example OpenID provider $version with go install"
  GOBIN="$dir" go install "github.com/zitadel/oidc/v3/example/server@$version"
fi
