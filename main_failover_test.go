package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// These tests fail a real primary over to its streaming standby under a
// Stripe-style load (SPEC.md, "Faults"): both are PostgreSQL servers of
// the test's own, made with initdb and pg_basebackup -R on ports of their
// own, and the primary is stopped with -m immediate (or frozen) while
// hookd, on a two-host DATABASE_URL with target_session_attrs=read-write,
// is answering deliveries.

// pgNode is one PostgreSQL server of a test's own.
type pgNode struct {
	t       *testing.T
	name    string
	bin     string
	dir     string
	data    string
	port    int
	asOwner func(name string, args ...string) *exec.Cmd
	// frozen holds the pids freeze stopped, to be continued at cleanup.
	mu     sync.Mutex
	frozen []int
}

// newPGNode prepares a server's directory under t.TempDir() and a free
// port. Without PostgreSQL's server binaries it skips, or fails under
// CI=true.
func newPGNode(t *testing.T, name string) *pgNode {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no initdb in /usr/lib/postgresql/*/bin: install PostgreSQL's server package (make db does)")
		}
		t.Skip("no initdb in /usr/lib/postgresql/*/bin")
	}
	sort.Strings(bins)
	n := &pgNode{t: t, name: name, bin: filepath.Dir(bins[len(bins)-1]), dir: t.TempDir()}
	n.asOwner = func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: its files and processes are
		// the postgres user's, who must reach the directory.
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chmod(filepath.Dir(n.dir), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(n.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		n.asOwner = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
		}
	}
	n.data = filepath.Join(n.dir, "data")
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	if n.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return n
}

// run runs one of PostgreSQL's programs as the server's owner.
func (n *pgNode) run(prog string, args ...string) {
	n.t.Helper()
	if out, err := n.asOwner(filepath.Join(n.bin, prog), args...).CombinedOutput(); err != nil {
		n.t.Fatalf("%s: %s %v: %v\n%s", n.name, prog, args, err, out)
	}
}

// start starts the server and stops it (by its postmaster's pid, through
// pg_ctl) when the test ends.
//
// Its port was free when chosen, but tests running beside it may take a
// port between then and now: a start that fails because its port is in
// use is tried again on another.
func (n *pgNode) start() {
	n.t.Helper()
	logFile := filepath.Join(n.dir, "log")
	for tries := 1; ; tries++ {
		out, err := n.asOwner(filepath.Join(n.bin, "pg_ctl"), "-D", n.data, "-l", logFile, "-w", "start",
			"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", n.port, n.dir)).CombinedOutput()
		if err == nil {
			break
		}
		log, _ := os.ReadFile(logFile)
		if tries == 3 || !strings.Contains(string(log), "already in use") {
			n.t.Fatalf("%s: pg_ctl start on port %d: %v\n%s\n%s", n.name, n.port, err, out, tail(string(log), 4000))
		}
		_, port, _ := net.SplitHostPort(freeAddr(n.t))
		n.port, _ = strconv.Atoi(port)
	}
	n.t.Cleanup(func() {
		n.thaw()
		_, _ = n.asOwner(filepath.Join(n.bin, "pg_ctl"), "-D", n.data, "-m", "immediate", "-w", "stop").CombinedOutput()
		if n.t.Failed() {
			if log, err := os.ReadFile(filepath.Join(n.dir, "log")); err == nil {
				n.t.Logf("%s's log:\n%s", n.name, tail(string(log), 4000))
			}
		}
	})
}

// stopImmediate stops the server as a crash would: no checkpoint, every
// session cut.
func (n *pgNode) stopImmediate() { n.run("pg_ctl", "-D", n.data, "-m", "immediate", "-w", "stop") }

// postmaster is the pid of the server's postmaster, from its pid file.
func (n *pgNode) postmaster() int {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		n.t.Fatalf("%s: %v", n.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		n.t.Fatalf("%s: postmaster.pid: %v", n.name, err)
	}
	return pid
}

// freeze stops the postmaster and every process it started with SIGSTOP,
// by pid: the host is gone, and its sockets stay open.
func (n *pgNode) freeze() {
	n.t.Helper()
	pm := n.postmaster()
	pids := append([]int{pm}, childrenOf(pm)...)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			n.frozen = append(n.frozen, pid)
		}
	}
}

// thaw continues what freeze stopped.
func (n *pgNode) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pid := range n.frozen {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	n.frozen = nil
}

// childrenOf returns the pids whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

func (n *pgNode) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.port, db)
}

// exec runs sql on the server's database db.
func (n *pgNode) exec(db, sql string) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.url(db))
	if err != nil {
		n.t.Fatalf("%s: %v", n.name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		n.t.Fatalf("%s: %s: %v", n.name, sql, err)
	}
}

// count runs a query of one bigint on the server's database db.
func (n *pgNode) count(db, sql string, args ...any) int64 {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.url(db))
	if err != nil {
		n.t.Fatalf("%s: %v", n.name, err)
	}
	defer conn.Close(context.Background())
	var v int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		n.t.Fatalf("%s: %s: %v", n.name, sql, err)
	}
	return v
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// pgPair is a primary and its streaming standby.
type pgPair struct {
	primary, standby *pgNode
	synchronous      bool
}

// newPGPair makes a primary with a database hookd, then its standby with
// pg_basebackup -R, streaming as application_name standby; synchronous:
// the primary's commits wait for the standby's flush
// (synchronous_standby_names names it, on both, as an HA manager keeps
// it). It waits until the primary sees the standby streaming.
func newPGPair(t *testing.T, synchronous bool) *pgPair {
	t.Helper()
	p := &pgPair{primary: newPGNode(t, "primary"), standby: newPGNode(t, "standby"), synchronous: synchronous}
	pr := p.primary
	pr.run("initdb", "-D", pr.data, "-U", "postgres", "--auth=trust", "--no-sync")
	conf := "\nwal_level = replica\nmax_wal_senders = 4\nwal_keep_size = 64MB\nshared_buffers = 32MB\nmax_connections = 60\n" +
		"hot_standby = on\n"
	if err := appendFile(filepath.Join(pr.data, "postgresql.conf"), conf); err != nil {
		t.Fatal(err)
	}
	pr.start()
	pr.exec("postgres", "CREATE DATABASE hookd")
	sb := p.standby
	sb.run("pg_basebackup", "-D", sb.data, "-R", "-X", "stream", "-c", "fast",
		"-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby", pr.port))
	sb.start()
	if synchronous {
		for _, n := range []*pgNode{pr, sb} {
			n.exec("postgres", "ALTER SYSTEM SET synchronous_standby_names = 'standby'")
			n.exec("postgres", "SELECT pg_reload_conf()")
		}
	}
	want := map[bool]string{true: "sync", false: "async"}[synchronous]
	queuetest.WaitFor(t, 30*time.Second, "the standby streaming ("+want+")", func() bool {
		return pr.count("postgres", `SELECT count(*) FROM pg_stat_replication
			WHERE application_name = 'standby' AND state = 'streaming' AND sync_state = $1`, want) == 1
	})
	return p
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// url is DATABASE_URL on both hosts, for the primary whichever it is.
func (p *pgPair) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/hookd?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.primary.port, p.standby.port)
}

// cutOff stops the standby's replication as a lagging network would:
// what the primary commits from now on never reaches it.
func (p *pgPair) cutOff() {
	sb := p.standby
	sb.exec("postgres", "ALTER SYSTEM SET primary_conninfo = ''")
	sb.exec("postgres", "SELECT pg_reload_conf()")
	queuetest.WaitFor(p.primary.t, 30*time.Second, "the standby's WAL receiver stopped", func() bool {
		return sb.count("postgres", `SELECT count(*) FROM pg_stat_wal_receiver`) == 0
	})
}

// promote makes the standby the primary, clearing its
// synchronous_standby_names first, as an HA manager does (its commits
// would otherwise wait for a standby that no longer exists), and returns
// when it accepts writes.
func (p *pgPair) promote() time.Time {
	sb := p.standby
	sb.exec("postgres", "ALTER SYSTEM RESET synchronous_standby_names")
	sb.run("pg_ctl", "-D", sb.data, "-w", "promote")
	sb.exec("postgres", "SELECT pg_reload_conf()")
	return time.Now()
}

// checkDoctor checks what hookd doctor says of the pair: a synchronous
// one, that a failover loses nothing answered 200; an asynchronous one,
// that it can.
func checkDoctor(t *testing.T, pair *pgPair) {
	t.Helper()
	r := doctor.Replication(t.Context(), pair.url())
	want, says := doctor.Warn, []string{"asynchronous", "standby", "can lose events already answered 200"}
	if pair.synchronous {
		want, says = doctor.OK, []string{"a commit waits for standby standby", "loses nothing answered 200"}
	}
	if r.Status != want {
		t.Errorf("doctor on a synchronous=%t pair: %s %q, want %s", pair.synchronous, r.Status, r.Detail, want)
	}
	for _, w := range says {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("doctor on a synchronous=%t pair: %q lacks %q", pair.synchronous, r.Detail, w)
		}
	}
}

// alertSink is HOOKD_ALERT_URL: it keeps the text of every alert posted,
// in the alerter's format ({"text": ...}).
type alertSink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	texts []string
}

func newAlertSink(t *testing.T) *alertSink {
	a := &alertSink{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.texts = append(a.texts, body.Text)
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// count is how many alerts held s.
func (a *alertSink) count(s string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, text := range a.texts {
		if strings.Contains(text, s) {
			n++
		}
	}
	return n
}

// failoverRun is the load of a failover test: senders deliver events
// Stripe-style (signed anew each post with stripe-go, posted again after
// any answer but a 2xx), a few at a time, each sender one event after
// another.
type failoverRun struct {
	mu      sync.Mutex
	senders []*stripeSender
	// ok counts the events answered 2xx so far.
	ok     atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
	client *http.Client
}

// startLoad starts workers senders, each starting an event at most every
// pace, so the load stays at hundreds of events on a shared machine; next
// returns each event to deliver (its id and payload). It goes on until
// stopLoad.
func startLoad(base string, workers int, pace time.Duration, next func() (string, []byte)) *failoverRun {
	client := &http.Client{Timeout: 20 * time.Second}
	run := &failoverRun{stop: make(chan struct{}), client: client}
	for range workers {
		run.wg.Go(func() {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for {
				select {
				case <-run.stop:
					return
				case <-tick.C:
				}
				id, payload := next()
				s := &stripeSender{id: id, payload: payload}
				run.mu.Lock()
				run.senders = append(run.senders, s)
				run.mu.Unlock()
				s.deliver(client, base, time.Now().Add(60*time.Second), 100*time.Millisecond)
				if !s.answered.IsZero() {
					run.ok.Add(1)
				}
			}
		})
	}
	return run
}

// stopLoad waits for every event under way to be answered (or given up
// on) and returns every sender.
func (run *failoverRun) stopLoad() []*stripeSender {
	close(run.stop)
	run.wg.Wait()
	run.client.CloseIdleConnections()
	return run.senders
}

// answered returns how many events were answered 2xx.
func (run *failoverRun) answered() int { return int(run.ok.Load()) }

// firstNew200 posts a new event every 50 ms, each a fresh one, until one
// is answered 2xx, and returns when; a deadline of limit fails the test.
func firstNew200(t *testing.T, base string, limit time.Duration) time.Time {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for ; time.Now().Before(deadline); <-tick.C {
		id := stripeevent.NewID("evt")
		s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		s.deliver(client, base, time.Time{}, time.Millisecond)
		if !s.answered.IsZero() {
			return s.answered
		}
		last = fmt.Sprint(s.err)
	}
	t.Fatalf("no new event answered 2xx within %s; last answer: %s", limit, last)
	return time.Time{}
}

// pgBouncer is a PgBouncer of the test's own, in transaction pooling mode,
// in front of whichever server is the primary: its config names the
// primary's port, and follow points it at another and reloads it (SIGHUP,
// by its pid), as an operator or an HA manager's hook does at a failover.
type pgBouncer struct {
	t    *testing.T
	ini  string
	port int
	cmd  *exec.Cmd
}

func startPgBouncer(t *testing.T, target *pgNode) *pgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no pgbouncer: install it (make pgbouncer does)")
		}
		t.Skip("no pgbouncer")
	}
	b := &pgBouncer{t: t, ini: filepath.Join(target.dir, "pgbouncer.ini")}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	b.port, _ = strconv.Atoi(port)
	b.write(target)
	args := []string{b.ini}
	if os.Geteuid() == 0 {
		args = []string{"-u", "postgres", b.ini}
	}
	b.cmd = exec.Command(bin, args...)
	log := &strings.Builder{}
	var mu sync.Mutex
	b.cmd.Stdout, b.cmd.Stderr = lockedWriter{&mu, log}, lockedWriter{&mu, log}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("pgbouncer's log:\n%s", tail(log.String(), 4000))
			mu.Unlock()
		}
	})
	queuetest.WaitFor(t, 10*time.Second, "pgbouncer listening", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return b
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (b *pgBouncer) write(target *pgNode) {
	b.t.Helper()
	ini := fmt.Sprintf(`[databases]
hookd = host=127.0.0.1 port=%d dbname=hookd user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
server_connect_timeout = 2
server_login_retry = 1
`, target.port, b.port)
	if err := os.WriteFile(b.ini, []byte(ini), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// follow points PgBouncer at target and reloads it.
func (b *pgBouncer) follow(target *pgNode) {
	b.t.Helper()
	b.write(target)
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		b.t.Fatalf("reload pgbouncer: %v", err)
	}
}

func (b *pgBouncer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/hookd?sslmode=disable&connect_timeout=2&default_query_exec_mode=%s",
		b.port, queuetest.PgBouncerExecMode)
}

// failoverCase is one way a failover test fails over.
type failoverCase struct {
	synchronous bool
	// pgbouncer: hookd reaches the primary through a PgBouncer that is
	// pointed at the new primary once it is promoted.
	pgbouncer bool
}

// TestFailover_SynchronousStandbyLosesNothing fails a synchronous pair
// over under load: every event answered 200 is on the new primary and
// processed in the end, none is in the app twice at once, and a new event
// is answered 200 within 3 s of the promotion, by the same process.
// Before, no lease was granted for the grace after the promotion (a
// promoted standby has empty unlogged tables) and every delivery was
// answered 503 for about 12 s.
func TestFailover_SynchronousStandbyLosesNothing(t *testing.T) {
	runFailover(t, failoverCase{synchronous: true})
}

// TestFailover_AsynchronousStandbyLosesNothingInTheEnd fails an
// asynchronous pair over, the standby cut off from the primary 2 s before
// the primary stops: what was answered 200 in those 2 s is gone from the
// new primary. hookd notices the failover by itself (its WAL timeline
// changed), audits it, alerts once, and reconciles with Stripe's Events
// API (the fake) at once, young events included, with
// HOOKD_RECONCILE_INTERVAL=0: every event answered 200 is processed in
// the end. Before, nothing noticed, and those events were never
// delivered again.
func TestFailover_AsynchronousStandbyLosesNothingInTheEnd(t *testing.T) {
	runFailover(t, failoverCase{})
}

// The same through PgBouncer.
func TestFailover_SynchronousStandbyThroughPgBouncer(t *testing.T) {
	runFailover(t, failoverCase{synchronous: true, pgbouncer: true})
}

func runFailover(t *testing.T, c failoverCase) {
	pair := newPGPair(t, c.synchronous)
	dbURL := pair.url()
	var bouncer *pgBouncer
	if c.pgbouncer {
		bouncer = startPgBouncer(t, pair.primary)
		dbURL = bouncer.url()
	}
	checkDoctor(t, pair)
	app := newLeaseApp(t, func(r *http.Request) int { return http.StatusOK })
	env := []string{
		"DATABASE_URL=" + dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_RETRY_INTERVAL=200ms",
		"HOOKD_LOG_LEVEL=warn",
	}
	// Stripe's Events API holds every event delivered, as Stripe's does.
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	alerts := newAlertSink(t)
	if !c.synchronous {
		env = append(env, "STRIPE_API_KEY="+api.Key(), "STRIPE_WEBHOOK_ENDPOINT_ID="+ep.ID, "HOOKD_STRIPE_API_URL="+api.URL,
			"HOOKD_RECONCILE_INTERVAL=0", "HOOKD_ALERT_URL="+alerts.srv.URL)
	}
	rig := newCrashRig(t, env)
	p := rig.start()
	run := startLoad(p.base, 4, 40*time.Millisecond, func() (string, []byte) {
		return api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now()})
	})
	queuetest.WaitFor(t, 60*time.Second, "100 events answered before the failover", func() bool { return run.answered() >= 100 })
	cutAt := run.answered()
	if !c.synchronous {
		pair.cutOff()
		// The load the standby misses: what is answered 200 from here on
		// is on the old primary alone.
		cut := time.NewTimer(2 * time.Second)
		<-cut.C
	}
	pair.primary.stopImmediate()
	if !c.synchronous {
		t.Logf("failover: %d events answered 200 after the standby was cut off, before the primary stopped", run.answered()-cutAt)
	}
	promoted := pair.promote()
	if bouncer != nil {
		bouncer.follow(pair.standby)
	}
	first := firstNew200(t, p.base, time.Until(promoted.Add(3*time.Second)))
	t.Logf("failover: the first new event was answered 200 %s after the promotion", first.Sub(promoted).Round(time.Millisecond))
	before := run.answered()
	queuetest.WaitFor(t, 60*time.Second, "50 more events answered after the failover", func() bool { return run.answered() >= before+50 })
	senders := run.stopLoad()

	pool, err := pgxpool.New(t.Context(), pair.standby.url("hookd"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var answered []string
	for _, s := range senders {
		if !s.answered.IsZero() {
			answered = append(answered, s.id)
		} else {
			t.Errorf("%s: never answered 2xx (%d posts, answers %v, last %v)", s.id, s.posts, s.statuses, s.err)
		}
	}
	lost := queuetest.Count(t, pool, `SELECT count(*) FROM unnest($1::text[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = a.id)
		  AND NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.event_id = a.id)`, answered)
	t.Logf("failover: %d events answered 2xx, %d of them not on the new primary once the load stopped", len(answered), lost)
	if c.synchronous && lost != 0 {
		t.Errorf("%d events answered 2xx are gone from the new primary", lost)
	}
	if !c.synchronous {
		queuetest.WaitFor(t, 60*time.Second, "the failover's reconcile run recorded", func() bool {
			return queuetest.Count(t, pool, `SELECT count(*) FROM reconcile_runs WHERE trigger = 'failover'`) == 1
		})
		var examined, recovered, queued, young int64
		var runErr *string
		if err := pool.QueryRow(t.Context(), `SELECT examined, recovered, queued, skipped_young, error FROM reconcile_runs
			WHERE trigger = 'failover'`).Scan(&examined, &recovered, &queued, &young, &runErr); err != nil {
			t.Fatal(err)
		}
		t.Logf("failover: the reconcile run after the failover examined %d events, recovered %d, queued %d, skipped as young %d",
			examined, recovered, queued, young)
		if young != 0 || runErr != nil {
			t.Errorf("the failover's reconcile run skipped %d young events, error %v; want none", young, deref(runErr))
		}
		if n := queuetest.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'failover'`); n != 1 {
			t.Errorf("failover audit entries: %d, want 1", n)
		}
		queuetest.WaitFor(t, 30*time.Second, "the failover alert", func() bool { return alerts.count("failed over") == 1 })
	}
	queuetest.WaitFor(t, 120*time.Second, "every event answered 2xx processed, the queue empty", func() bool {
		return queuetest.Count(t, pool, `SELECT count(*) FROM unnest($1::text[]) AS a(id)
			WHERE NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = a.id)`, answered) == 0 &&
			queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events`) == 0
	})
	_, overlaps := app.seen()
	for id, n := range overlaps {
		t.Errorf("%s was in the app twice at once (%d times)", id, n)
	}
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
}

// TestFailover_FrozenPrimaryNeverHangsHookd freezes the primary (SIGSTOP
// to its postmaster and every process it started, by pid): its sockets
// stay open and nothing answers, as when a host vanishes. Every delivery
// meanwhile is answered 503 within hookd's own timeouts, none is answered
// 200, and once the standby is promoted a new event is answered 200 again
// by the same process, and every event answered 503 is answered 200 when
// delivered again.
func TestFailover_FrozenPrimaryNeverHangsHookd(t *testing.T) {
	pair := newPGPair(t, true)
	app := newLeaseApp(t, func(r *http.Request) int { return http.StatusOK })
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + pair.url(),
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_RETRY_INTERVAL=200ms",
		"HOOKD_LOG_LEVEL=warn",
	})
	p := rig.start()
	firstNew200(t, p.base, 30*time.Second)
	pair.primary.freeze()

	// Deliveries while the primary is frozen: each is answered, and not
	// with a 2xx. The client gives up after 30 s: a hang.
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	const during = 6
	frozen := make([]*stripeSender, during)
	var wg sync.WaitGroup
	for i := range frozen {
		id := stripeevent.NewID("evt")
		frozen[i] = &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		wg.Go(func() {
			started := time.Now()
			frozen[i].deliver(client, p.base, time.Time{}, time.Millisecond)
			t.Logf("frozen primary: %s answered after %s: %v", frozen[i].id, time.Since(started).Round(time.Millisecond), frozen[i].err)
		})
	}
	wg.Wait()
	for _, s := range frozen {
		if !s.answered.IsZero() {
			t.Errorf("%s: answered 2xx (%s) while the primary was frozen", s.id, s.body)
		}
		if s.statuses[http.StatusServiceUnavailable] != 1 {
			t.Errorf("%s: answers %v, last error %v; want one 503", s.id, s.statuses, s.err)
		}
	}
	promoted := pair.promote()
	first := firstNew200(t, p.base, 60*time.Second)
	t.Logf("frozen primary: the first new event was answered 200 %s after the promotion", first.Sub(promoted).Round(time.Millisecond))
	for _, s := range frozen {
		s.deliver(client, p.base, time.Now().Add(30*time.Second), 100*time.Millisecond)
		if s.answered.IsZero() {
			t.Errorf("%s: not answered 2xx after the promotion: %v", s.id, s.err)
		}
	}
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
}
