// Package e2e holds hookd's end-to-end tests: the real binary, built once per
// run, receives signed Stripe webhooks and forwards them to a downstream the
// test controls, while Chromium, driven by playwright-go, uses the dashboard
// the way support staff do. Each test gets its own database, process, port
// and browser context, so the tests run in parallel.
//
// The tests need Chromium and the Playwright driver; `make test` (through
// .ci/browser.sh) installs both. Without them the run fails: a missing
// browser must never look like a passing suite.
package e2e
