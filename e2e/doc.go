// Package e2e holds hookd's end-to-end tests: the real binary receives signed
// Stripe webhooks and forwards them to a downstream the test controls, while
// Chromium, driven by playwright-go, uses the dashboard as support staff do.
// Each test gets its own database, process, port and browser context, so the
// tests run in parallel. They need Chromium and the Playwright driver, which
// `make test` installs; without them the run fails, never passes.
package e2e
