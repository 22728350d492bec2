package e2e

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// driverVersion is the playwright-core release github.com/mxschmitt/playwright-go
// v0.6401.0 insists on, exactly; .ci/browser.sh installs the same one.
const driverVersion = "1.64.1"

// outputDir receives a screenshot, the page's HTML and hookd's log for every
// failed test, one folder per test.
const outputDir = "test-output"

// Shared by every test in the package: building hookd and starting a browser
// cost seconds, a browser context costs milliseconds.
var (
	hookdBin string
	browser  playwright.Browser
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	if err := os.RemoveAll(outputDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binDir, err := os.MkdirTemp("", "hookd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(binDir)

	start := time.Now()
	hookdBin, err = buildHookd(binDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	built := time.Since(start)

	pw, b, err := startBrowser()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n\nThe end-to-end tests need Chromium and the Playwright driver %s.\n"+
			"Install both with `make test` (or run .ci/browser.sh), then run the tests again.\n", err, driverVersion)
		return 1
	}
	browser = b
	if testing.Verbose() {
		fmt.Printf("e2e: hookd built in %s; Chromium %s launched in %s\n",
			built.Round(time.Millisecond), browser.Version(), (time.Since(start) - built).Round(time.Millisecond))
	}

	code := m.Run()

	if err := browser.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: close browser:", err)
	}
	if err := pw.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stop playwright:", err)
	}
	return code
}

// buildHookd builds the binary the way it ships (static, CGO off), so the
// tests exercise the embedded migrations, templates and static files.
func buildHookd(dir string) (string, error) {
	bin := filepath.Join(dir, "hookd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hookd/hookd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hookd: %v\n%s", err, out)
	}
	return bin, nil
}

// startBrowser starts the Playwright driver and launches the system's
// Chromium. Nothing here downloads: the driver and the browser are whatever
// .ci/browser.sh installed, and a missing one is an error.
func startBrowser() (*playwright.Playwright, playwright.Browser, error) {
	driverDir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driverDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, fmt.Errorf("find the Playwright driver: PLAYWRIGHT_DRIVER_PATH is unset and %v", err)
		}
		// The default of the Makefile and .ci/browser.sh, so `go test ./e2e/`
		// run by hand finds what `make test` installed.
		driverDir = filepath.Join(home, ".cache", "hookd", "playwright-driver-"+driverVersion)
	}
	if _, err := os.Stat(filepath.Join(driverDir, "package", "cli.js")); err != nil {
		return nil, nil, fmt.Errorf("no Playwright driver in %s (set PLAYWRIGHT_DRIVER_PATH to use another folder): %v", driverDir, err)
	}
	// The npm package has no Node.js of its own; .ci/browser.sh links one
	// into the driver folder, and a Node.js on PATH does as well.
	if _, err := os.Stat(filepath.Join(driverDir, "node")); err != nil && os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		node, lookErr := exec.LookPath("node")
		if lookErr != nil {
			return nil, nil, fmt.Errorf("no Node.js: neither %s nor node on PATH", filepath.Join(driverDir, "node"))
		}
		os.Setenv("PLAYWRIGHT_NODEJS_PATH", node)
	}

	chromium, err := findChromium()
	if err != nil {
		return nil, nil, err
	}

	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory:     driverDir,
		SkipInstallBrowsers: true,
		Stdout:              os.Stderr,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("start the Playwright driver: %w", err)
	}
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		// Playwright would otherwise look for its own headless-shell build,
		// which is downloaded from the internet and not installed here.
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{
			"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			// Chromium phones Google services on its own; resolving no name
			// but the loopback ones keeps the tests offline and quiet.
			"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
		},
	})
	if err != nil {
		_ = pw.Stop()
		return nil, nil, fmt.Errorf("launch %s: %w", chromium, err)
	}
	return pw, b, nil
}

// findChromium returns HOOKD_E2E_CHROMIUM when set, else the Chromium on PATH
// (Debian names it chromium, some distributions chromium-browser).
func findChromium() (string, error) {
	if p := os.Getenv("HOOKD_E2E_CHROMIUM"); p != "" {
		return p, nil
	}
	var tried []string
	for _, name := range []string{"chromium", "chromium-browser"} {
		p, err := exec.LookPath(name)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, exec.ErrNotFound) {
			return "", err
		}
		tried = append(tried, name)
	}
	return "", fmt.Errorf("no Chromium on PATH (looked for %s; HOOKD_E2E_CHROMIUM names another)", strings.Join(tried, ", "))
}
