#!/usr/bin/env bash
# Makes sure the end-to-end tests can drive a browser offline: Debian's
# Chromium, and the Playwright driver (playwright-core from the npm registry)
# that github.com/mxschmitt/playwright-go pins, with the machine's Node.js.
# Idempotent: a second run changes nothing. Prints nothing when all is there.
set -euo pipefail

driver_version=1.64.1 # must equal what playwright-go v0.6401.0 requires, exactly
driver_dir="${PLAYWRIGHT_DRIVER_PATH:-$HOME/.cache/hookd/playwright-driver-$driver_version}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v chromium >/dev/null 2>&1; then
  echo "browser: installing Debian's chromium with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! command -v node >/dev/null 2>&1; then
  echo "browser: installing Node.js with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi

# playwright-core 1.64 requires Node.js 20 or later (its package.json engines),
# and Debian 12's own nodejs is 18: say so here rather than fail in the tests.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "browser: Node.js $(node --version) is too old for playwright-core $driver_version; install Node.js 20 or later (e.g. from NodeSource)" >&2
  exit 1
fi

if [ ! -f "$driver_dir/package/cli.js" ] ||
   ! grep -q "\"version\": \"$driver_version\"" "$driver_dir/package/package.json"; then
  echo "browser: fetching playwright-core $driver_version from the npm registry"
  rm -rf "$driver_dir"
  mkdir -p "$driver_dir"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "playwright-core@$driver_version" >/dev/null)
  tar xzf "$tmp/playwright-core-$driver_version.tgz" -C "$driver_dir"
  rm -rf "$tmp"
fi
# playwright-go runs the driver with <driver-dir>/node unless told otherwise.
ln -sfn "$(command -v node)" "$driver_dir/node"
