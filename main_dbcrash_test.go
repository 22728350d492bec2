package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// privateCluster is a PostgreSQL server of the test's own, which it may
// crash: the shared test server must never be.
type privateCluster struct {
	t       *testing.T
	bin     string
	data    string
	port    int
	asOwner func(name string, args ...string) *exec.Cmd
}

// startPrivateCluster initdbs and starts a server of the newest installed
// PostgreSQL on a free port, stopped when the test ends. Without initdb it
// skips, or fails under CI=true.
func startPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no initdb in /usr/lib/postgresql/*/bin: install PostgreSQL's server package (make db does)")
		}
		t.Skip("no initdb in /usr/lib/postgresql/*/bin")
	}
	sort.Strings(bins)
	c := &privateCluster{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "hookd-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c.asOwner = func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: its files and processes are
		// the postgres user's.
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asOwner = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
		}
	}
	c.data = filepath.Join(dir, "data")
	if out, err := c.asOwner(filepath.Join(c.bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	c.pgctl("start", "-w", "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, dir))
	t.Cleanup(func() {
		_, _ = c.asOwner(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", "immediate", "stop").CombinedOutput()
	})
	return c
}

func (c *privateCluster) pgctl(args ...string) {
	c.t.Helper()
	cmd := c.asOwner(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.data, "-l", filepath.Join(filepath.Dir(c.data), "log")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

func (c *privateCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// A crash of PostgreSQL itself (pg_ctl stop -m immediate: no checkpoint,
// crash recovery at the next start) while events are in the app never
// lets one event into the app twice at once: the unlogged leases are lost
// with the crash, and no lease is granted again until every processor
// that held one has stopped. Every delivery ends answered 200 and
// processed.
func TestLeases_DatabaseCrashNeverRunsAnEventTwiceAtOnce(t *testing.T) {
	t.Parallel()
	const events = 20
	cluster := startPrivateCluster(t)
	conn, err := pgx.Connect(t.Context(), cluster.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `CREATE DATABASE hookd`); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	app := newLeaseApp(t, func(r *http.Request) int {
		hold(r, 2*time.Second)
		return http.StatusOK
	})
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + cluster.url("hookd"),
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_FORWARD_TIMEOUT=10s",
		"HOOKD_RETRY_INTERVAL=100ms",
	})
	p := rig.start()

	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	senders := make([]*stripeSender, events)
	var wg sync.WaitGroup
	for i := range senders {
		id := stripeevent.NewID("evt")
		senders[i] = &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		wg.Go(func() { senders[i].deliver(client, p.base, time.Now().Add(90*time.Second), 500*time.Millisecond) })
	}
	queuetest.WaitFor(t, 30*time.Second, "the events in the app", func() bool { return len(app.calls()) == events })
	// The crash, and crash recovery at once.
	cluster.pgctl("stop", "-m", "immediate")
	cluster.pgctl("start", "-w", "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", cluster.port, filepath.Dir(cluster.data)))
	wg.Wait()

	for _, s := range senders {
		if s.answered.IsZero() {
			t.Errorf("%s: never answered 2xx (%d posts, answers %v, last %v)", s.id, s.posts, s.statuses, s.err)
		}
	}
	_, overlaps := app.seen()
	for id, n := range overlaps {
		t.Errorf("%s was in the app twice at once (%d times)", id, n)
	}
	pool, err := pgxpool.New(t.Context(), cluster.url("hookd"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	queuetest.WaitFor(t, 60*time.Second, "every event processed and the queue empty", func() bool {
		return queuetest.Count(t, pool, `SELECT count(*) FROM processed_webhook_events`) == events &&
			queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events`) == 0
	})
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
	calls := app.calls()
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("%d events reached the app %d times in all across the crash", events, total)
}
