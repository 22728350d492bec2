package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeHookd stands in for ./bin/hookd under .ci/make-run.sh: it notes each
// command it is run with, answers `user check` as $FAKE_ADMIN says the
// database would, and returns at once (serve included).
const fakeHookd = `#!/bin/sh
echo "$*" >> "$FAKE_LOG"
if [ "$1 $2" = "user check" ]; then
  read -r password
  case $FAKE_ADMIN in
    signs-in) echo "$3 signs in with this password"; exit 0 ;;
    none) echo "no account for $3" >&2; exit 1 ;;
    other) echo "$3: the account's password is another (hookd user passwd sets it)" >&2; exit 1 ;;
  esac
fi
exit 0
`

// makeRun runs .ci/make-run.sh, as make run does, over a dev.env holding
// devEnv, the demo's settings with the demo app on a free port, and a fake
// hookd, with extra added to its environment; it returns what it printed,
// what it logged, the commands hookd was run with, and its error.
func makeRun(t *testing.T, devEnv, admin string, extra ...string) (stdout, stderr, ran string, err error) {
	t.Helper()
	dir := t.TempDir()
	demoEnv := filepath.Join(dir, "demo.env")
	writeDemoEnv(t, demoEnv, freePort(t))
	bin, log, env := filepath.Join(dir, "hookd"), filepath.Join(dir, "ran"), filepath.Join(dir, "dev.env")
	if err := os.WriteFile(bin, []byte(fakeHookd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte(devEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", ".ci/make-run.sh")
	cmd.Env = append(os.Environ(), "HOOKD="+bin, "FAKE_LOG="+log, "FAKE_ADMIN="+admin, "DEV_ENV="+env, "DEMO_ENV="+demoEnv,
		"DATABASE_URL=postgres://localhost/hookd", "STRIPE_WEBHOOK_SECRET=", "STRIPE_WEBHOOK_SECRETS=", "HOOKD_FORWARD_URL=",
		"HOOKD_ENDPOINTS=", "HOOKD_ADDR=", "HOOKD_PROCESSOR=")
	cmd.Env = append(cmd.Env, extra...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	commands, _ := os.ReadFile(log)
	return out.String(), errOut.String(), string(commands), err
}

// writeDemoEnv writes .ci/demo.env to path with the demo app on port.
func writeDemoEnv(t *testing.T, path, port string) {
	t.Helper()
	demo, err := os.ReadFile(".ci/demo.env")
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(demo), "127.0.0.1:8081", "127.0.0.1:"+port, 1)
	if moved == string(demo) {
		t.Fatal(".ci/demo.env no longer forwards to 127.0.0.1:8081")
	}
	if err := os.WriteFile(path, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort returns a port no program listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// With several endpoints in STRIPE_WEBHOOK_SECRETS and no
// STRIPE_WEBHOOK_SECRET, make run starts, and its steps sign with the
// endpoints: each command names one with -endpoint.
func TestMakeRun_SeveralEndpoints(t *testing.T) {
	t.Parallel()
	const secrets = "account=whsec_a;connect=whsec_b;thin=whsec_c"
	out, stderr, ran, err := makeRun(t, "# STRIPE_WEBHOOK_SECRET=whsec_old\n"+
		"STRIPE_WEBHOOK_SECRETS='"+secrets+"'\n"+
		"HOOKD_ENDPOINTS='connect:connect=true;thin:kind=thin'\n"+
		"HOOKD_ADMIN_EMAIL=admin@localhost\nHOOKD_ADMIN_PASSWORD=pw123456789\nHOOKD_FORWARD_SECRET=whsec_fwd\n", "none")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{
		"STRIPE_WEBHOOK_SECRETS='" + secrets + "' ./bin/hookd send-test-event -n 50 -endpoint account",
		"./bin/hookd send-test-event -thin -endpoint thin",
		"./bin/hookd send-test-event -account acct_1Demo -endpoint connect",
		"(each with STRIPE_WEBHOOK_SECRETS='" + secrets + "' as above)",
		"sign in as admin@localhost, password pw123456789",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make run's steps lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "STRIPE_WEBHOOK_SECRET=") {
		t.Errorf("the steps sign with STRIPE_WEBHOOK_SECRET, which is not set:\n%s", out)
	}
	if !strings.Contains(ran, "demo-app") || !strings.Contains(ran, "serve") {
		t.Errorf("hookd ran %q, want the demo app and serve", ran)
	}
}

// A value holding ; unquoted in dev.env is named, not run as a command.
func TestMakeRun_UnquotedSemicolonIsNamed(t *testing.T) {
	t.Parallel()
	_, stderr, ran, err := makeRun(t, "STRIPE_WEBHOOK_SECRETS=account=whsec_a;connect=whsec_b\n", "none")
	if err == nil || !strings.Contains(stderr, "quote a value that holds ;") || ran != "" {
		t.Errorf("make run over an unquoted ;: %v, ran %q, said %q", err, ran, stderr)
	}
}

// With HOOKD_FORWARD_URL pointing at your own app, make run says events go
// there and starts no demo app on its port.
func TestMakeRun_YourOwnApp(t *testing.T) {
	t.Parallel()
	out, stderr, ran, err := makeRun(t, "STRIPE_WEBHOOK_SECRET=whsec_a\nHOOKD_FORWARD_URL=http://127.0.0.1:3000/stripe\n"+
		"HOOKD_ADMIN_EMAIL=admin@localhost\nHOOKD_ADMIN_PASSWORD=pw123456789\n", "signs-in")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	if !strings.Contains(out, "forwarding every event to http://127.0.0.1:3000/stripe") || strings.Contains(out, "demo app (") {
		t.Errorf("make run does not say events go to your app:\n%s", out)
	}
	if strings.Contains(ran, "demo-app") {
		t.Errorf("make run started the demo app on your app's port: ran %q", ran)
	}
	if !strings.Contains(out, "STRIPE_WEBHOOK_SECRET=whsec_a ./bin/hookd send-test-event -n 50\n") {
		t.Errorf("the one-endpoint steps changed:\n%s", out)
	}
}

// A second clone on the same database: the admin account exists with the
// first clone's password, so make run says so and how to set it, and
// prints no password that would not sign in.
func TestMakeRun_SecondCloneSaysTheAdminExists(t *testing.T) {
	t.Parallel()
	out, stderr, _, err := makeRun(t, "STRIPE_WEBHOOK_SECRET=whsec_a\n"+
		"HOOKD_ADMIN_EMAIL=admin@localhost\nHOOKD_ADMIN_PASSWORD=secondclone123\n", "other")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	if strings.Contains(out, "secondclone123") {
		t.Errorf("make run prints a password that does not sign in:\n%s", out)
	}
	for _, want := range []string{"sign in as admin@localhost. That account exists already in this database",
		"DATABASE_URL=postgres://localhost/hookd ./bin/hookd user passwd admin@localhost"} {
		if !strings.Contains(out, want) {
			t.Errorf("make run lacks %q:\n%s", want, out)
		}
	}
}

// Thin events, pings and generation-failure notices come only through a
// thin destination, a connected account's events through a Connect
// endpoint: make run's steps sign each with such an endpoint (or one that
// declares nothing), never with a declared snapshot endpoint's secret,
// which contradicts its declaration for as long as hookd remembers what
// arrived. With no endpoint that may take them, the steps say how to add
// one instead of signing with another's.
func TestMakeRun_ThinStepsSignWithAThinEndpoint(t *testing.T) {
	t.Parallel()
	const admin = "HOOKD_ADMIN_EMAIL=admin@localhost\nHOOKD_ADMIN_PASSWORD=pw123456789\n"
	out, stderr, _, err := makeRun(t, "STRIPE_WEBHOOK_SECRETS='account=whsec_a;thin=whsec_c'\n"+
		"HOOKD_ENDPOINTS='account:kind=snapshot;thin:kind=thin'\n"+admin, "none")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{"send-test-event -thin -endpoint thin", "send-test-event -ping -endpoint thin",
		"send-test-event -generation-failure -endpoint thin"} {
		if !strings.Contains(out, want) {
			t.Errorf("make run's steps lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "send-test-event -account") || !strings.Contains(out, "declare one connect=true") {
		t.Errorf("with no Connect endpoint the steps still send a connected account's event:\n%s", out)
	}

	out, stderr, _, err = makeRun(t, "STRIPE_WEBHOOK_SECRETS='account=whsec_a;connect=whsec_b'\n"+
		"HOOKD_ENDPOINTS='account:kind=snapshot;connect:connect=true'\n"+admin, "none")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	for _, flag := range []string{"-thin", "-ping", "-generation-failure"} {
		if strings.Contains(out, "send-test-event "+flag) {
			t.Errorf("with no thin destination the steps still send %s, signed with a snapshot endpoint's secret:\n%s", flag, out)
		}
	}
	if !strings.Contains(out, "kind=thin in HOOKD_ENDPOINTS to send them") || !strings.Contains(out, "send-test-event -account acct_1Demo -endpoint connect") {
		t.Errorf("make run does not say how to send thin events:\n%s", out)
	}
}

// fakePostgres stands in for a running cluster's tools under
// .ci/postgres.sh: each notes how it was run; psql signs in over TCP when
// $FAKE_LOGIN is ok, and says the role postgres has no password when
// $FAKE_NOPASSWORD is t.
var fakePostgres = map[string]string{
	"pg_lsclusters": "#!/bin/sh\necho '17 main 5432 online postgres /var/lib/postgresql/17/main log'\n",
	"pg_isready":    "#!/bin/sh\nexit 0\n",
	"createdb":      "#!/bin/sh\necho \"createdb $*\" >> \"$FAKE_LOG\"\n",
	"sudo":          "#!/bin/sh\nexec \"$@\"\n",
	"runuser":       "#!/bin/sh\nshift 3\nexec \"$@\"\n",
	"psql": `#!/bin/sh
echo "psql $*" >> "$FAKE_LOG"
case "$*" in
  *"-h 127.0.0.1"*) [ "$FAKE_LOGIN" = ok ] ;;
  *"rolpassword IS NULL"*) echo "$FAKE_NOPASSWORD" ;;
  *"FROM pg_database"*) echo 1 ;;
esac
`,
}

// postgresScript runs .ci/postgres.sh over the fake tools; it returns
// what it printed, what it logged, the commands run, and its error.
func postgresScript(t *testing.T, env ...string) (stdout, stderr, ran string, err error) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range fakePostgres {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "ran")
	cmd := exec.Command("bash", ".ci/postgres.sh", "hookd")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_LOG="+log, "DATABASE_URL=")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	commands, _ := os.ReadFile(log)
	return out.String(), errOut.String(), string(commands), err
}

// make run never changes a password the postgres role already has: with
// password postgres it changes nothing; with another it stops, saying
// why and the two ways on, and changes nothing; with none it sets it
// and says so.
func TestPostgresScript_KeepsAPasswordTheRoleHas(t *testing.T) {
	t.Parallel()
	out, stderr, ran, err := postgresScript(t, "FAKE_LOGIN=ok")
	if err != nil || strings.Contains(ran, "ALTER ROLE") || out != "" {
		t.Errorf("password postgres already: %v, ran %q, said %q %q; want nothing changed, nothing said", err, ran, out, stderr)
	}

	_, stderr, ran, err = postgresScript(t, "FAKE_LOGIN=fail", "FAKE_NOPASSWORD=f")
	if err == nil || strings.Contains(ran, "ALTER ROLE") || strings.Contains(ran, "createdb") {
		t.Errorf("another password: %v, ran %q; want a failure and nothing changed", err, ran)
	}
	for _, want := range []string{"cannot sign in as role postgres with password postgres",
		"make run DATABASE_URL='postgres://USER:PASSWORD@127.0.0.1:5432/hookd?sslmode=disable'",
		`ALTER ROLE postgres PASSWORD 'postgres'`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("another password: make says %q, lacking %q", stderr, want)
		}
	}

	out, stderr, ran, err = postgresScript(t, "FAKE_LOGIN=fail", "FAKE_NOPASSWORD=t")
	if err != nil || !strings.Contains(ran, "ALTER ROLE postgres PASSWORD 'postgres'") ||
		!strings.Contains(out, "role postgres had no password: set it to postgres") {
		t.Errorf("no password: %v, ran %q, said %q %q; want it set and said", err, ran, out, stderr)
	}

	_, stderr, ran, err = postgresScript(t, "FAKE_LOGIN=fail", "DATABASE_URL=postgres://me:mine@127.0.0.1:5432/hookd")
	if err != nil || strings.Contains(ran, "ALTER ROLE") {
		t.Errorf("DATABASE_URL of your own: %v, ran %q, said %q; want nothing changed", err, ran, stderr)
	}
}

// make run says the ports it takes: hookd's, the metrics', and the demo
// app's, each with the setting that moves it.
func TestMakeRun_SaysItsPorts(t *testing.T) {
	t.Parallel()
	out, stderr, _, err := makeRun(t, "STRIPE_WEBHOOK_SECRET=whsec_a\n"+
		"HOOKD_ADMIN_EMAIL=admin@localhost\nHOOKD_ADMIN_PASSWORD=pw123456789\n", "signs-in")
	if err != nil {
		t.Fatalf("make run: %v\n%s\n%s", err, out, stderr)
	}
	if want := "ports:      8080 hookd (HOOKD_ADDR), 9090 metrics (HOOKD_METRICS_ADDR), "; !strings.Contains(out, want) ||
		!strings.Contains(out, " the demo app (") || !strings.Contains(out, "demo.env's HOOKD_FORWARD_URL)\n") {
		t.Errorf("make run does not say its ports, want %q:\n%s", want, out)
	}
}

// With another program on the demo app's port, make run stops before
// starting anything, saying which port and what to do: hookd would
// forward the demo's events to that program.
func TestMakeRun_DemoPortTakenStops(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	demoEnv := filepath.Join(t.TempDir(), "demo.env")
	writeDemoEnv(t, demoEnv, port)
	out, stderr, ran, err := makeRun(t, "STRIPE_WEBHOOK_SECRET=whsec_a\n", "signs-in", "DEMO_ENV="+demoEnv)
	if err == nil || strings.Contains(ran, "demo-app") || strings.Contains(ran, "serve") {
		t.Errorf("demo port taken: %v, ran %q; want make run to stop before starting anything\n%s", err, ran, out)
	}
	if want := "another program listens on 127.0.0.1:" + port + ", where the demo app would"; !strings.Contains(stderr, want) {
		t.Errorf("make run says %q, lacking %q", stderr, want)
	}
}
