// Command loadgen measures the built hookd binary from outside, as a user
// would load it, against a real PostgreSQL on the same machine, beside
// peers loaded the same way in the same rounds. `make bench-load` runs it.
//
// Receiver: hookd runs with the discard processor on a database of its own,
// and the seed's handler written plainly in Go (plainseed, -plain) on
// another. Each round 16 clients post real stripe-go-signed 1-2 KB events
// over HTTP to each in turn, for the same time, so both share the machine's
// load of that moment. hookd's events/s over the plain handler's, and the
// CPU per event of each and of its database's backends, are the figures to
// watch.
//
// Drain: a second hookd, on a second database, forwards to a sink in this
// process (another process than hookd: real HTTP, instant 200). Each round
// seeds a backlog of due events and times the retry loop draining it, from
// the sink's first request to the queue's last row gone, with the share of
// the machine's CPU left idle meanwhile (from /proc/stat). In the same
// round a River burn-down (riverbench, -river) of as many jobs, on a fresh
// database each run, posts to the same sink at each of -river-workers, timed
// from the sink's first request to River's last completion written;
// hookd's events/s over River's better configuration is the figure to
// watch.
//
// Suspects (-suspects, off by default): the p99 of fast deliveries to the
// replicas that do not run suspects, before and while one runs them alone
// (suspects.go).
//
// Every round prints a line, then the medians; peak resident sets are
// VmHWM from /proc/PID/status. Databases and processes it made are removed
// at the end, also on Ctrl-C.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/stripeevent"
)

const webhookSecret = "whsec_loadgen_secret"

type options struct {
	burst       bool
	burstEvents int
	burstApp    time.Duration
	hookd       string
	server      string
	plain       string
	river       string
	riverWork   []int
	riverFetch  time.Duration
	rounds      int
	roundTime   time.Duration
	clients     int
	drainEvents int
	drainRounds int
	receiver    bool
	drain       bool
	procs       int

	suspects        bool
	suspectsCost    bool
	suspectsCount   int
	suspectsApp     time.Duration
	suspectsClients int

	destSpecs []destSpec // -destinations; none: the discard processor
	// drainOrdered: -drain-ordered.
	drainOrdered bool
	// drainFailing: -drain-failing.
	drainFailing bool
	failStatus   int
	// failingRetries: -failing-retries.
	failingRetries bool
	wal            bool
}

func main() {
	var o options
	flag.StringVar(&o.hookd, "hookd", "bin/hookd", "the hookd binary to measure; several, comma-separated, take turns in each round")
	flag.StringVar(&o.server, "server", "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL server URL; loadgen creates and drops its own databases there")
	flag.StringVar(&o.plain, "plain", "bin/plainseed", "the plain handler (e2e/loadgen/plainseed) loaded beside hookd's receiver; empty: none")
	flag.StringVar(&o.river, "river", "bin/riverbench", "the River burn-down (.ci/bench/river) run beside hookd's drain; empty: none")
	// River fetches at most MaxWorkers jobs per FetchCooldown: at its
	// default of 100ms, 100 workers could never pass 1,000 jobs/s, a cap of
	// its configuration rather than of its design.
	flag.DurationVar(&o.riverFetch, "river-fetch-cooldown", 10*time.Millisecond, "River's FetchCooldown (River's default is 100ms, which caps it at 10 × workers jobs/s)")
	riverWorkers := flag.String("river-workers", "100,300", "River's worker counts, comma-separated, each a run of its own in every drain round")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved receiver rounds")
	flag.DurationVar(&o.roundTime, "round-time", 10*time.Second, "how long the HTTP load runs on each server per round")
	flag.IntVar(&o.clients, "clients", 16, "concurrent HTTP clients, and the plain handler's database connections")
	flag.IntVar(&o.drainEvents, "drain-events", 20_000, "due events per drain round")
	flag.IntVar(&o.drainRounds, "drain-rounds", 3, "drain rounds")
	flag.BoolVar(&o.receiver, "receiver", true, "run the receiver rounds")
	flag.BoolVar(&o.drain, "drain", true, "run the drain rounds")
	flag.BoolVar(&o.burst, "burst", true, "run the burst: concurrent deliveries to a slow app")
	flag.IntVar(&o.burstEvents, "burst-events", 1000, "concurrent deliveries in the burst")
	flag.DurationVar(&o.burstApp, "burst-app", 2*time.Second, "how long the app takes with each event in the burst")
	flag.IntVar(&o.procs, "procs", 1, "GOMAXPROCS of the load generator while it posts to the receiver (hookd keeps its own)")
	flag.BoolVar(&o.suspects, "suspects", false, "run the suspects rounds: fast deliveries to three replicas before and while suspects run alone on one")
	flag.BoolVar(&o.suspectsCost, "suspects-cost", false, "time -suspects-count suspects run alone on one replica, the app answering in -suspects-app, then never")
	flag.IntVar(&o.suspectsCount, "suspects-count", 64, "suspects put on the queue in each suspects round")
	flag.DurationVar(&o.suspectsApp, "suspects-app", 300*time.Millisecond, "how long the app takes with each suspect")
	flag.IntVar(&o.suspectsClients, "suspects-clients", 6, "concurrent HTTP clients in the suspects rounds, spread over the three replicas")
	destinations := flag.String("destinations", "", "receiver rounds with hookd forwarding to apps in this process instead of the discard processor, one target "+
		"per binary and count, comma-separated: 1 is HOOKD_FORWARD_URL alone, 1f one destination in a HOOKD_DESTINATIONS_FILE, N (2 or more) a file of N, all taking every event")
	flag.IntVar(&orderKeys, "order-keys", orderKeys, "the customers the posted events are of, at random: the keys of a destination ordered by customer (-destinations 1o)")
	flag.BoolVar(&o.drainFailing, "drain-failing", false, "in the drain rounds, each binary also drains the backlog as a destination of a file beside a second destination with a delivery of every event, healthy, and then answering -failing-status to every call, compared")
	flag.BoolVar(&o.drainOrdered, "drain-ordered", false, "in the drain rounds, each binary also drains the backlog as a destination of a file, unordered and then ordered by customer (-order-keys customers), compared")
	failing := flag.Bool("failing-destination", false, "with -destinations, beside each configuration with a file of N: N and one more destination, whose app answers -failing-status to every call, and N+1 all healthy, each compared with it")
	flag.IntVar(&o.failStatus, "failing-status", http.StatusInternalServerError, "what the failing destination's app answers: 500 is a failure that never says the app is down, 503 one that does (a circuit breaker, where one watches the destination, counts it)")
	flag.BoolVar(&o.failingRetries, "failing-retries", false, "with -failing-destination, every destination target runs with HOOKD_DEMO_BACKOFF (each hour of the backoff a second: 1 m is 17 ms, 24 h 24 s), so the failing destination's four retries of each event come due within the round, the retry load of a day of failures, rather than a minute after it")
	flag.BoolVar(&o.wal, "wal", false, "count each receiver phase's WAL per event with pg_waldump (CHECKPOINT before each phase; needs read access to the server's pg_wal)")
	flag.Parse()
	if *destinations != "" {
		specs, err := parseDestinations(*destinations, *failing)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(2)
		}
		o.destSpecs = specs
	} else if *failing {
		fmt.Fprintln(os.Stderr, "loadgen: -failing-destination needs -destinations")
		os.Exit(2)
	}
	for _, w := range strings.Split(*riverWorkers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "loadgen: -river-workers: %q is not a worker count\n", w)
			os.Exit(2)
		}
		o.riverWork = append(o.riverWork, n)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	fmt.Println(describeMachine(ctx, o.server))
	if o.receiver {
		if err := receiverRounds(ctx, o); err != nil {
			return err
		}
	}
	if o.drain {
		if err := drainRounds(ctx, o); err != nil {
			return err
		}
	}
	if o.burst {
		if err := bursts(ctx, o); err != nil {
			return err
		}
		if err := mixedApp(ctx, o); err != nil {
			return err
		}
	}
	if o.suspects {
		if err := suspectRounds(ctx, o); err != nil {
			return err
		}
	}
	if o.suspectsCost {
		return suspectCosts(ctx, o)
	}
	return nil
}

// mixedApp posts events for roundTime from 64 clients to a hookd
// forwarding to an app that takes 3 s with one event in ten and answers the
// others at once, and reports how long the fast ones waited: a delivery
// waits only for its own processor, never for a slow one that reached the
// database with it.
func mixedApp(ctx context.Context, o options) error {
	const clients, slowEvery, slowFor = 64, 10, 3 * time.Second
	app, err := startSlowSink(slowFor)
	if err != nil {
		return err
	}
	defer app.close()
	app.slowOnly = "_slow"
	targets, cleanup, err := startTargets(ctx, o, "mixed", "HOOKD_PROCESSOR=forward",
		"HOOKD_FORWARD_URL="+app.url, "HOOKD_FORWARD_TIMEOUT=10s")
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("\nmixed app: %d clients for %s; the app takes %s with one event in %d, the others at once\n",
		clients, o.roundTime, slowFor, slowEvery)
	for _, t := range targets {
		fast, slow, err := postMixed(t.h.url+"/webhooks/stripe", clients, slowEvery, time.Now().Add(o.roundTime))
		if err != nil {
			return fmt.Errorf("%s: %w", t.bin, err)
		}
		fmt.Printf("  %s: %d fast events p50 %.1f ms p99 %.1f ms max %.0f ms | %d slow events p50 %.0f ms\n",
			t.bin, len(fast), ms(fast[len(fast)/2]), ms(fast[len(fast)*99/100]), ms(fast[len(fast)-1]),
			len(slow), ms(slow[len(slow)/2]))
	}
	return nil
}

// postMixed posts events to target from clients clients until deadline,
// one in slowEvery with "_slow" in its id, and returns how long the others
// (fast) and those (slow) took to be answered, each sorted. Any answer but
// 200 is an error, and so is a run with no answer of either kind.
func postMixed(target string, clients, slowEvery int, deadline time.Time) (fast, slow []time.Duration, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			client := &poster{addr: u.Host, path: u.Path}
			defer client.close()
			prefix := fmt.Sprintf("evt_mixed_%s_c%d_", randomHex(4), c)
			for i := 0; time.Now().Before(deadline); i++ {
				gen := newEventGen(prefix)
				if i%slowEvery == c%slowEvery {
					gen = newEventGen(prefix + "_slow")
				}
				gen.seq = i
				body := gen.next()
				t0 := time.Now()
				status, answer, err := client.post(body, stripeevent.Sign(body, webhookSecret, time.Now()))
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err == nil && status != http.StatusOK:
					err = fmt.Errorf("hookd answered %d: %s", status, bytes.TrimSpace(answer))
					fallthrough
				case err != nil:
					firstErr = cmp.Or(firstErr, err)
				case strings.Contains(string(body[:64]), "_slow"):
					slow = append(slow, d)
				default:
					fast = append(fast, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	slices.Sort(fast)
	slices.Sort(slow)
	if len(fast) == 0 || len(slow) == 0 {
		return nil, nil, fmt.Errorf("%d fast and %d slow answers", len(fast), len(slow))
	}
	return fast, slow, nil
}

// bursts posts burstEvents distinct events at once, each on a connection
// of its own, to a hookd forwarding to an app that takes burstApp with
// each, with the default database pool and then with pool_max_conns=8,
// while a prober asks /readyz every 50 ms. Waiting for the app holds no
// database connection, so every event is meant to be answered 200 once the
// app has answered, and /readyz at once throughout.
func bursts(ctx context.Context, o options) error {
	app, err := startSlowSink(o.burstApp)
	if err != nil {
		return err
	}
	defer app.close()
	fmt.Printf("\nburst: %d distinct events at once to hookd forwarding to an app that takes %s with each; /readyz every 50 ms\n",
		o.burstEvents, o.burstApp)
	for _, pool := range []int{0, 8} {
		targets, cleanup, err := startTargets(ctx, o, "burst", "HOOKD_PROCESSOR=forward",
			"HOOKD_FORWARD_URL="+app.url, "HOOKD_FORWARD_TIMEOUT=10s")
		if err != nil {
			return err
		}
		for _, t := range targets {
			if pool != 0 {
				// Restart on the same database with the smaller pool.
				t.h.stop()
				if t.h, err = startHookd(ctx, t.bin, withPoolSize(t.dbURL, pool), "HOOKD_PROCESSOR=forward",
					"HOOKD_FORWARD_URL="+app.url, "HOOKD_FORWARD_TIMEOUT=10s"); err != nil {
					cleanup()
					return err
				}
			}
			r, err := burstOnce(ctx, t.h.url, o.burstEvents)
			if pool != 0 {
				// The restarted hookd is not among cleanup's.
				defer t.h.stop()
			}
			if err != nil {
				cleanup()
				return fmt.Errorf("%s: %w", t.bin, err)
			}
			label := "default pool"
			if pool != 0 {
				label = fmt.Sprintf("pool_max_conns=%d", pool)
			}
			fmt.Printf("  %s (%s): %d of %d answered 200 (%d processed, %d deferred), slowest %.0f ms, p50 %.0f ms"+
				" | /readyz %d probes, slowest %.1f ms, not 200: %d | peak RSS %.1f MiB\n",
				t.bin, label, r.ok, o.burstEvents, r.processed, r.deferred, ms(r.slowest), ms(r.p50),
				r.probes, ms(r.slowestProbe), r.badProbes, must(peakRSS(t.h.cmd.Process.Pid)))
		}
		cleanup()
	}
	return nil
}

func must(v float64, _ error) float64 { return v }

type burstResult struct {
	ok, processed, deferred int
	slowest, p50            time.Duration
	probes, badProbes       int
	slowestProbe            time.Duration
}

func burstOnce(ctx context.Context, base string, n int) (burstResult, error) {
	var r burstResult
	stopProbe := probeReadyz(base, &r)
	u, err := url.Parse(base + "/webhooks/stripe")
	if err != nil {
		stopProbe()
		return r, err
	}
	gen := newEventGen(fmt.Sprintf("evt_burst_%s_", randomHex(4)))
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = gen.next()
	}
	var mu sync.Mutex
	var took []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, body := range bodies {
		wg.Go(func() {
			client := &poster{addr: u.Host, path: u.Path}
			defer client.close()
			<-start
			t0 := time.Now()
			status, answer, err := client.post(body, stripeevent.Sign(body, webhookSecret, time.Now()))
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				firstErr = cmp.Or(firstErr, err)
			case status == http.StatusOK:
				r.ok++
				switch string(bytes.TrimSpace(answer)) {
				case "processed":
					r.processed++
				case "deferred":
					r.deferred++
				}
			}
			took = append(took, d)
		})
	}
	close(start)
	wg.Wait()
	stopProbe()
	if firstErr != nil {
		return r, firstErr
	}
	slices.Sort(took)
	r.slowest, r.p50 = took[len(took)-1], took[len(took)/2]
	return r, ctx.Err()
}

// probeReadyz asks base's /readyz every 50 ms, counting in r the probes,
// the slowest and those not answered 200, until the func it returns is
// called; r is the prober's until then.
func probeReadyz(base string, r *burstResult) (stop func()) {
	stopProbe := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		client := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-stopProbe:
				return
			case <-t.C:
			}
			t0 := time.Now()
			resp, err := client.Get(base + "/readyz")
			took := time.Since(t0)
			r.probes++
			r.slowestProbe = max(r.slowestProbe, took)
			if err != nil || resp.StatusCode != http.StatusOK {
				r.badProbes++
			}
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	return func() {
		close(stopProbe)
		<-probed
	}
}

// slowSink is the user's app on a slow day: it answers 200 after a delay,
// to every event or, with slowOnly set, to the events whose id has it.
type slowSink struct {
	url      string
	srv      *http.Server
	slowOnly string
}

func startSlowSink(delay time.Duration) (*slowSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &slowSink{url: "http://" + ln.Addr().String() + "/events"}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if s.slowOnly == "" || strings.Contains(r.Header.Get("Hookd-Event-Id"), s.slowOnly) {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *slowSink) close() { _ = s.srv.Close() }

// receiverRound is one round's figures for one server.
type receiverRound struct {
	events   float64 // per second
	p50, p99 time.Duration
	rssMiB   float64
	// CPU per event, in µs, of the server and of its database's backends.
	serverCPU, postgresCPU float64
	// With -wal: WAL bytes, records and commits per event; payload is the
	// bytes of body sent per event.
	wal, walRecords, commits, payload float64
	storedPayload                     float64
	walErr                            error
	// With -destinations: calls per second of the least called healthy app.
	healthyCalls float64
}

// target is one hookd binary under measurement, on a database of its own.
type target struct {
	bin   string
	h     *hookd
	dbURL string

	// With -destinations: what it is called in the figures, its
	// destinations and the paths of its healthy apps.
	label   string
	spec    *destSpec
	healthy []string
	failing string // "": none

	// With -drain-ordered: the destination its seeded backlog is for, and
	// whether that destination is ordered by customer ("": default).
	drainDest    string
	drainOrdered bool
	// With -drain-failing: a second destination its backlog's events also
	// have a delivery to, and whether its app fails every call.
	drainBeside   string
	besideFailing bool
}

// name is what the figures call t.
func (t *target) name() string { return cmp.Or(t.label, t.bin) }

// startTargets starts one hookd per binary of -hookd, each on a new
// database named for phase, and returns them with a func that stops them
// and drops their databases.
func startTargets(ctx context.Context, o options, phase string, env ...string) ([]*target, func(), error) {
	var targets []*target
	var cleanups []func()
	cleanup := func() {
		for _, c := range slices.Backward(cleanups) {
			c()
		}
	}
	for i, bin := range strings.Split(o.hookd, ",") {
		dbURL, drop, err := createDatabase(ctx, o.server, fmt.Sprintf("%s%d", phase, i))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, drop)
		h, err := startHookd(ctx, bin, dbURL, env...)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, h.stop)
		targets = append(targets, &target{bin: bin, h: h, dbURL: dbURL})
	}
	return targets, cleanup, nil
}

func receiverRounds(ctx context.Context, o options) error {
	var m meters
	if len(o.destSpecs) > 0 {
		apps, err := startDestApps(o.failStatus)
		if err != nil {
			return err
		}
		defer apps.close()
		m.apps = apps
	}
	if o.wal {
		w, err := newWALReader(ctx, o.server)
		if err != nil {
			return err
		}
		m.wal = w
	}
	targets, plain, cleanup, err := startReceivers(ctx, o, m.apps)
	if err != nil {
		return err
	}
	defer cleanup()

	// The load generator shares the machine with what it measures. Its
	// clients wait on the network almost all the time, and one P keeps
	// their wake-ups on one thread: on two cores a second P cost it a
	// fifth more CPU per event, CPU hookd and PostgreSQL did not get. The
	// drain's sink, which plays the user's app, keeps every P.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.procs))

	if len(o.destSpecs) > 0 {
		fmt.Printf("\nreceiver: %d clients posting signed 1-2 KB events to hookd forwarding to apps in the load generator that answer at once (every destination takes every event)", o.clients)
	} else {
		fmt.Printf("\nreceiver: %d clients posting signed 1-2 KB events to hookd (discard processor)", o.clients)
	}
	if plain != nil {
		fmt.Printf(" and to the seed's handler written plainly in Go (%s: one transaction, lock, dedup read, marker insert; pool of %d)",
			plain.bin, o.clients)
	}
	fmt.Printf(", %s each per round, taking turns\n", o.roundTime)
	rounds := make([][]receiverRound, len(targets))
	for i := range o.rounds {
		results, err := loadRound(ctx, o, targets, i, m)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: load %s\n", i+1, loadAverage())
		for j, t := range targets {
			r, err := reportReceiverRound(t, t == plain, results[j])
			if err != nil {
				return err
			}
			rounds[j] = append(rounds[j], r)
		}
		if plain != nil {
			printOverPlain(targets, rounds, i)
		}
	}
	printReceiverMedians(targets, plain != nil, rounds)
	if len(o.destSpecs) > 0 {
		printDestComparisons(targets, rounds)
	}
	return nil
}

// startReceivers starts the receiver rounds' hookds and, with -plain, the
// plain handler, last of the targets it returns, each on a database of its
// own; cleanup stops them and drops their databases.
func startReceivers(ctx context.Context, o options, apps *destApps) (targets []*target, plain *target, cleanup func(), err error) {
	if apps != nil {
		targets, cleanup, err = startDestTargets(ctx, o, apps)
	} else {
		targets, cleanup, err = startTargets(ctx, o, "recv", "HOOKD_PROCESSOR=discard")
	}
	if err != nil || o.plain == "" {
		return targets, nil, cleanup, err
	}
	dbURL, drop, err := createDatabase(ctx, o.server, "recvplain")
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	h, err := startPlain(ctx, o.plain, dbURL, o.clients)
	if err != nil {
		drop()
		cleanup()
		return nil, nil, nil, err
	}
	plain = &target{bin: o.plain, h: h, dbURL: dbURL}
	stopHookds := cleanup
	return append(targets, plain), plain, func() { h.stop(); drop(); stopHookds() }, nil
}

// loadRound posts to each target in turn for o.roundTime, and returns what
// each answered with the CPU it and its database's backends used meanwhile.
func loadRound(ctx context.Context, o options, targets []*target, round int, m meters) ([]loadResult, error) {
	results := make([]loadResult, len(targets))
	// Every other round the other way round, so that no server always
	// meets the load that arrives late in a round.
	order := make([]int, len(targets))
	for j := range order {
		order[j] = j
	}
	if round%2 == 1 {
		slices.Reverse(order)
	}
	for _, j := range order {
		t := targets[j]
		var mark walMark
		if m.wal != nil {
			var err error
			if mark, err = m.wal.start(ctx, t.dbURL); err != nil {
				return nil, fmt.Errorf("%s: %w", t.name(), err)
			}
		}
		calls := m.calls(t)
		serverCPU, selfCPU := processCPU(t.h.cmd.Process.Pid), processCPU(os.Getpid())
		pgCPU := backendsCPU(ctx, t.dbURL)
		res, err := postEvents(ctx, t.h.url+"/webhooks/stripe", o.clients, o.roundTime, round)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name(), err)
		}
		res.hookdCPU = processCPU(t.h.cmd.Process.Pid) - serverCPU
		res.loadgenCPU = processCPU(os.Getpid()) - selfCPU
		res.postgresCPU = backendsCPU(ctx, t.dbURL).since(pgCPU)
		for k, c := range m.calls(t) {
			res.calls = append(res.calls, c-calls[k])
		}
		if m.wal != nil {
			res.wal = m.wal.since(ctx, mark)
			res.storedPayload = storedPayload(ctx, t.dbURL)
		}
		results[j] = res
	}
	return results, nil
}

// reportReceiverRound prints one target's figures of a round and returns
// them; isPlain says the target is the plain handler.
func reportReceiverRound(t *target, isPlain bool, res loadResult) (receiverRound, error) {
	r := receiverRound{events: res.perSecond, p50: res.p50, p99: res.p99,
		serverCPU: perEvent(res.hookdCPU, res.count), postgresCPU: perEvent(res.postgresCPU, res.count),
		wal: float64(res.wal.bytes) / float64(res.count), walRecords: float64(res.wal.records) / float64(res.count),
		commits: float64(res.wal.commits) / float64(res.count), payload: float64(res.bodyBytes) / float64(res.count),
		walErr: res.wal.err, storedPayload: res.storedPayload}
	if r.walErr != nil { // a part counted is no figure
		r.wal, r.walRecords, r.commits = 0, 0, 0
	}
	if len(t.healthy) > 0 {
		r.healthyCalls = float64(slices.Min(res.calls[:len(t.healthy)])) / res.elapsed.Seconds()
	}
	var err error
	if r.rssMiB, err = peakRSS(t.h.cmd.Process.Pid); err != nil {
		return r, err
	}
	who := "hookd"
	if isPlain {
		who = "handler"
	}
	fmt.Printf("  %s: %6.0f events/s  p50 %5.2f ms  p99 %6.2f ms | peak RSS %.1f MiB"+
		" | CPU per event: %s %.0f µs, its postgres backends %.0f µs, loadgen %.0f µs\n",
		t.name(), r.events, ms(r.p50), ms(r.p99), r.rssMiB, who, r.serverCPU, r.postgresCPU,
		perEvent(res.loadgenCPU, res.count))
	if n := res.notProcessed; n > 0 {
		fmt.Printf("  %s: %d answers were 200 but not \"processed\" (deferred to the queue)\n", t.name(), n)
	}
	printPhaseExtras(t, res, r)
	return r, nil
}

// printOverPlain prints each hookd's figures of round i over the plain
// handler's, the last target's.
func printOverPlain(targets []*target, rounds [][]receiverRound, i int) {
	p := rounds[len(targets)-1][i]
	for j, t := range targets[:len(targets)-1] {
		r := rounds[j][i]
		fmt.Printf("  %s / plain handler: events/s %.2f, postgres CPU per event %.2f, hookd's CPU per event over the handler's %.2f\n",
			t.name(), r.events/p.events, r.postgresCPU/p.postgresCPU, r.serverCPU/p.serverCPU)
	}
}

// printReceiverMedians prints each target's medians over the rounds and,
// with a plain handler (the last target), the medians of each hookd's
// ratios to it.
func printReceiverMedians(targets []*target, withPlain bool, rounds [][]receiverRound) {
	fmt.Printf("medians of %d rounds:\n", len(rounds[0]))
	for j, t := range targets {
		med := func(f func(r receiverRound) float64) float64 { return median(rounds[j], f) }
		fmt.Printf("  %s: %6.0f events/s  p50 %5.2f ms  p99 %6.2f ms | peak RSS %.1f MiB | CPU per event: %.0f µs, its postgres backends %.0f µs\n",
			t.name(),
			med(func(r receiverRound) float64 { return r.events }),
			med(func(r receiverRound) float64 { return ms(r.p50) }),
			med(func(r receiverRound) float64 { return ms(r.p99) }),
			rounds[j][len(rounds[j])-1].rssMiB,
			med(func(r receiverRound) float64 { return r.serverCPU }),
			med(func(r receiverRound) float64 { return r.postgresCPU }))
	}
	if !withPlain {
		return
	}
	p := rounds[len(targets)-1]
	for j, t := range targets[:len(targets)-1] {
		ratio := func(f func(r receiverRound) float64) float64 {
			v := make([]float64, len(p))
			for i := range p {
				v[i] = f(rounds[j][i]) / f(p[i])
			}
			return median(v, func(x float64) float64 { return x })
		}
		fmt.Printf("  %s / plain handler, median of the rounds' ratios: events/s %.2f, postgres CPU per event %.2f, hookd's CPU per event over the handler's %.2f\n",
			t.name(), ratio(func(r receiverRound) float64 { return r.events }),
			ratio(func(r receiverRound) float64 { return r.postgresCPU }),
			ratio(func(r receiverRound) float64 { return r.serverCPU }))
	}
}

type loadResult struct {
	count                int
	hookdCPU, loadgenCPU time.Duration
	postgresCPU          time.Duration // of hookd's backends
	perSecond            float64
	p50, p99             time.Duration
	notProcessed         int64
	bodyBytes            int64 // of the events answered
	elapsed              time.Duration
	calls                []int64  // with -destinations: each healthy app's calls
	wal                  walCount // with -wal
	storedPayload        float64  // with -wal: bytes a marker's payload takes, on average; 0: unknown
}

// postEvents posts new signed events from clients goroutines for d and
// returns the rate of 200s and their latency percentiles. Any other answer
// is an error: every event is new, so none may be refused.
func postEvents(ctx context.Context, target string, clients int, d time.Duration, round int) (loadResult, error) {
	u, err := url.Parse(target)
	if err != nil {
		return loadResult{}, err
	}
	prefix := fmt.Sprintf("evt_load_%s_r%d_", randomHex(4), round)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu           sync.Mutex
		latencies    []time.Duration
		bodyBytes    int64
		firstErr     error
		notProcessed atomic.Int64
		wg           sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			mine, sent, err := postUntil(ctx, u, fmt.Sprintf("%sc%d_", prefix, c), deadline, &notProcessed)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil && ctx.Err() == nil {
					firstErr = err
				}
				cancel()
				return
			}
			latencies = append(latencies, mine...)
			bodyBytes += sent
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return loadResult{}, firstErr
	}
	if err := ctx.Err(); err != nil && len(latencies) == 0 {
		return loadResult{}, err
	}
	if len(latencies) == 0 {
		return loadResult{}, errors.New("no request completed")
	}
	slices.Sort(latencies)
	return loadResult{
		count:        len(latencies),
		perSecond:    float64(len(latencies)) / elapsed.Seconds(),
		p50:          latencies[len(latencies)*50/100],
		p99:          latencies[len(latencies)*99/100],
		notProcessed: notProcessed.Load(),
		bodyBytes:    bodyBytes,
		elapsed:      elapsed,
	}, nil
}

// postUntil is one client of postEvents: it posts new events with ids
// starting with prefix over one connection to u until deadline or until
// ctx is done, counts the 200s that were not "processed" in notProcessed,
// and returns how long each answer took and the bytes of the bodies
// answered. Any answer but 200 is an error.
func postUntil(ctx context.Context, u *url.URL, prefix string, deadline time.Time, notProcessed *atomic.Int64) ([]time.Duration, int64, error) {
	gen := newEventGen(prefix)
	client := &poster{addr: u.Host, path: u.Path}
	defer client.close()
	var took []time.Duration
	var sent int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		body := gen.next()
		sig := stripeevent.Sign(body, webhookSecret, time.Now())
		t0 := time.Now()
		status, answer, err := client.post(body, sig)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("hookd answered %d: %s", status, bytes.TrimSpace(answer))
		}
		if err != nil {
			return nil, 0, err
		}
		if string(bytes.TrimSpace(answer)) != "processed" {
			notProcessed.Add(1)
		}
		took = append(took, time.Since(t0))
		sent += int64(len(body))
	}
	return took, sent, nil
}

// poster posts to hookd over one keep-alive HTTP/1.1 connection, as Stripe
// does, writing each request in a single write. It is a lean client on
// purpose: the load generator shares the machine with what it measures, as
// pgbench's C client does, so every microsecond it spends is one hookd and
// PostgreSQL do not get. It reads the answers hookd gives, a status line,
// headers and a body of known length, without net/http's parser, which
// made a quarter of its CPU per event.
type poster struct {
	addr, path string
	conn       net.Conn
	r          *bufio.Reader
	req        []byte
	answer     []byte
}

func (p *poster) post(body []byte, sig string) (status int, answer []byte, err error) {
	if p.conn == nil {
		if p.conn, err = net.Dial("tcp", p.addr); err != nil {
			return 0, nil, err
		}
		p.r = bufio.NewReader(p.conn)
	}
	p.req = fmt.Appendf(p.req[:0], "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: Stripe/1.0 (+https://stripe.com/docs/webhooks)\r\n"+
		"Content-Type: application/json; charset=utf-8\r\nStripe-Signature: %s\r\nContent-Length: %d\r\n\r\n",
		p.path, p.addr, sig, len(body))
	p.req = append(p.req, body...)
	if _, err := p.conn.Write(p.req); err != nil {
		p.close()
		return 0, nil, err
	}
	status, answer, keepAlive, err := p.readAnswer()
	if err != nil || !keepAlive {
		p.close()
	}
	return status, answer, err
}

// readAnswer reads one HTTP/1.1 answer with a Content-Length, as hookd's
// short answers all have. The body it returns is valid until the next call.
func (p *poster) readAnswer() (status int, body []byte, keepAlive bool, err error) {
	line, err := p.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	proto, rest, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if status, err = strconv.Atoi(string(code)); err != nil || !bytes.Equal(proto, []byte("HTTP/1.1")) {
		return 0, nil, false, fmt.Errorf("not an HTTP/1.1 status line: %q", line)
	}
	length, keepAlive := -1, true
	for {
		line, err := p.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		name, value, _ := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case len(name) == 0:
			if length < 0 {
				return 0, nil, false, errors.New("an answer without Content-Length")
			}
			p.answer = slices.Grow(p.answer[:0], length)[:length]
			_, err := io.ReadFull(p.r, p.answer)
			return status, p.answer, keepAlive, err
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, fmt.Errorf("an answer with Transfer-Encoding %q", value)
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keepAlive = false
		}
	}
}

func (p *poster) close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}

// orderKeys is how many customers the events are of: the keys of a
// destination ordered by customer (-order-keys).
var orderKeys = 1000

// eventGen makes Stripe invoice.paid events of 1 to 2 KB with unique ids,
// each of one of orderKeys customers at random: the clients' events of
// one customer come at once only as often as they would by chance.
type eventGen struct {
	prefix string
	seq    int
	// pad is hex, so it goes into a JSON string as it is.
	pad string
	// customer is the last event's customer.
	customer string
}

func newEventGen(prefix string) *eventGen {
	return &eventGen{prefix: prefix, pad: strings.Repeat(randomHex(32), 16)}
}

func (g *eventGen) next() []byte {
	g.seq++
	id := g.prefix + strconv.Itoa(g.seq)
	g.customer = fmt.Sprintf("cus_%s%d", g.pad[:8], rand.IntN(orderKeys))
	object := fmt.Appendf(nil, `{"id":"in_%s","object":"invoice","account_country":"US","amount_due":2000,"amount_paid":2000,`+
		`"amount_remaining":0,"attempt_count":1,"attempted":true,"billing_reason":"subscription_cycle",`+
		`"collection_method":"charge_automatically","currency":"usd","customer":%q,"customer_email":"jenny@example.com",`+
		`"lines":{"object":"list","data":[{"id":"il_%s","object":"line_item","amount":2000,"currency":"usd",`+
		`"description":"1 × Pro (at $20.00 / month)","period":{"end":1767225600,"start":1764547200},"quantity":1}],`+
		`"has_more":false,"total_count":1},"livemode":false,"metadata":{"note":"%s"},"paid":true,"status":"paid",`+
		`"subtotal":2000,"total":2000}`,
		id, g.customer, id, g.pad[:160+g.seq%850])
	return stripeevent.Event{ID: id, Type: "invoice.paid", Created: time.Now(), Object: object}.JSON()
}

type drainRound struct {
	perSecond float64
	took      time.Duration
	idle      float64 // share of CPU time idle, 0..1
	rssMiB    float64
	// CPU time used by hookd (or riverbench) and by this process (the
	// sink, mostly) while the backlog was drained.
	hookdCPU, sinkCPU time.Duration
	postgresCPU       time.Duration // of the database's backends
	// besideCalls counts the calls to a -drain-failing target's second
	// destination while the sink's backlog drained.
	besideCalls int64
}

// drainBench is the drain rounds: hookd's targets and River's worker
// counts, and each one's figures round by round.
type drainBench struct {
	o       options
	sink    *sink
	targets []*target
	workers []int          // River's worker counts; none without -river
	hookd   [][]drainRound // by target, then round
	river   [][]drainRound // by worker count, then round
}

// moreDrainTargets starts drain targets beside the one-URL ones: each
// binary's backlog as a destination of a file, in some configuration.
type moreDrainTargets func(context.Context, options, *sink) ([]*target, func(), error)

func drainRounds(ctx context.Context, o options) error {
	sink, err := startSink(o.failStatus)
	if err != nil {
		return err
	}
	defer sink.close()
	targets, cleanup, err := startTargets(ctx, o, "drain", "HOOKD_PROCESSOR=forward",
		"HOOKD_FORWARD_URL="+sink.url, "HOOKD_RETRY_INTERVAL=100ms")
	if err != nil {
		return err
	}
	defer cleanup()
	for _, more := range []struct {
		on    bool
		start moreDrainTargets
	}{{o.drainOrdered, startOrderedDrainTargets}, {o.drainFailing, startBesideDrainTargets}} {
		if !more.on {
			continue
		}
		ts, cleanup, err := more.start(ctx, o, sink)
		if err != nil {
			return err
		}
		defer cleanup()
		targets = append(targets, ts...)
	}
	b := &drainBench{o: o, sink: sink, targets: targets, hookd: make([][]drainRound, len(targets))}
	if o.river != "" {
		b.workers = o.riverWork
	}
	b.river = make([][]drainRound, len(b.workers))

	fmt.Printf("\ndrain: %d due events forwarded by hookd's retry loop over HTTP to a sink in another process (instant 200)", o.drainEvents)
	if len(b.workers) > 0 {
		fmt.Printf(";\n  beside it River v0.51.2 (%s) burning down as many jobs inserted at once, its worker POSTing each payload to the same sink,"+
			" on a fresh database each run, at %s workers, FetchCooldown %s", o.river, strings.Trim(strings.ReplaceAll(fmt.Sprint(b.workers), " ", ", "), "[]"), o.riverFetch)
	}
	fmt.Println()
	for i := range o.drainRounds {
		fmt.Printf("round %d:\n", i+1)
		if err := b.round(ctx, i); err != nil {
			return err
		}
	}
	b.printMedians()
	return nil
}

// round runs round i: each hookd's drain and each of River's burn-downs,
// hookd's first in odd rounds and River's first in even ones.
func (b *drainBench) round(ctx context.Context, i int) error {
	var runs []func() error
	for j := range b.targets {
		runs = append(runs, func() error { return b.drainHookd(ctx, j, i) })
	}
	for k := range b.workers {
		runs = append(runs, func() error { return b.burnRiver(ctx, k, i) })
	}
	if i%2 == 1 {
		slices.Reverse(runs)
	}
	for _, run := range runs {
		if err := run(); err != nil {
			return err
		}
	}
	if len(b.workers) == 0 {
		return nil
	}
	best, bestW := bestRiver(b.river, b.workers, i)
	rb := b.river[slices.Index(b.workers, bestW)][i]
	for j, t := range b.targets {
		r := b.hookd[j][i]
		fmt.Printf("  %s / River's better (%d workers, %.0f jobs/s): events/s %.2f, CPU per event of the process and its postgres backends %.2f\n",
			t.bin, bestW, best, r.perSecond/best, float64(r.hookdCPU+r.postgresCPU)/float64(rb.hookdCPU+rb.postgresCPU))
	}
	return nil
}

// drainHookd runs target j's drain of round i and prints its figures.
func (b *drainBench) drainHookd(ctx context.Context, j, i int) error {
	t, n := b.targets[j], b.o.drainEvents
	r, err := drainOnce(ctx, t, b.sink, n, i)
	if err != nil {
		return fmt.Errorf("%s: %w", t.bin, err)
	}
	b.hookd[j] = append(b.hookd[j], r)
	fmt.Printf("  %s: %d events in %.2f s = %6.0f events/s | CPU idle %4.1f%% | peak RSS %.1f MiB | load %s"+
		" | CPU per event: hookd %.0f µs, postgres backends %.0f µs, sink %.0f µs\n",
		t.name(), n, r.took.Seconds(), r.perSecond, 100*r.idle, r.rssMiB, loadAverage(),
		perEvent(r.hookdCPU, n), perEvent(r.postgresCPU, n), perEvent(r.sinkCPU, n))
	return nil
}

// burnRiver runs River's burn-down of round i at its k-th worker count
// and prints its figures.
func (b *drainBench) burnRiver(ctx context.Context, k, i int) error {
	w, n := b.workers[k], b.o.drainEvents
	r, err := riverOnce(ctx, b.o, b.sink, w, i)
	if err != nil {
		return fmt.Errorf("%s: %w", b.o.river, err)
	}
	b.river[k] = append(b.river[k], r)
	fmt.Printf("  River, %d workers: %d jobs in %.2f s = %6.0f jobs/s | CPU idle %4.1f%% | peak RSS %.1f MiB (with its insert) | load %s"+
		" | CPU per job: riverbench %.0f µs, postgres backends %.0f µs, sink %.0f µs\n",
		w, n, r.took.Seconds(), r.perSecond, 100*r.idle, r.rssMiB, loadAverage(),
		perEvent(r.hookdCPU, n), perEvent(r.postgresCPU, n), perEvent(r.sinkCPU, n))
	return nil
}

// printMedians prints each hookd's and each River configuration's medians
// over the rounds, and the median of each hookd's ratios to River's better
// configuration of each round.
func (b *drainBench) printMedians() {
	fmt.Printf("medians of %d rounds:\n", b.o.drainRounds)
	defer printBesideDrain(b)
	defer printOrderedDrain(b)
	for j, t := range b.targets {
		fmt.Printf("  %s: %6.0f events/s | CPU idle %4.1f%% | peak RSS %.1f MiB\n", t.name(),
			median(b.hookd[j], func(r drainRound) float64 { return r.perSecond }),
			100*median(b.hookd[j], func(r drainRound) float64 { return r.idle }),
			b.hookd[j][len(b.hookd[j])-1].rssMiB)
	}
	for k, w := range b.workers {
		fmt.Printf("  River, %d workers: %6.0f jobs/s | CPU idle %4.1f%% | peak RSS %.1f MiB (with its insert)\n", w,
			median(b.river[k], func(r drainRound) float64 { return r.perSecond }),
			100*median(b.river[k], func(r drainRound) float64 { return r.idle }),
			median(b.river[k], func(r drainRound) float64 { return r.rssMiB }))
	}
	if len(b.workers) == 0 {
		return
	}
	for j, t := range b.targets {
		ratios := make([]float64, b.o.drainRounds)
		for i := range ratios {
			best, _ := bestRiver(b.river, b.workers, i)
			ratios[i] = b.hookd[j][i].perSecond / best
		}
		fmt.Printf("  %s / River's better configuration, median of the rounds' ratios: %.2f\n", t.bin,
			median(ratios, func(x float64) float64 { return x }))
	}
}

// bestRiver returns River's highest rate of round i and its worker count.
func bestRiver(rounds [][]drainRound, workers []int, i int) (float64, int) {
	var best float64
	var bestW int
	for k, w := range workers {
		if r := rounds[k][i].perSecond; r > best {
			best, bestW = r, w
		}
	}
	return best, bestW
}

// riverOnce runs one River burn-down of o.drainEvents jobs with workers
// workers on a fresh database, posting to sink, and times it as drainOnce
// times hookd: from the sink's first request until River has written the
// last job completed. The CPU counts start once the jobs are inserted, just
// before the client starts.
func riverOnce(ctx context.Context, o options, sink *sink, workers, round int) (drainRound, error) {
	dbURL, drop, err := createDatabase(ctx, o.server, fmt.Sprintf("river%d", workers))
	if err != nil {
		return drainRound{}, err
	}
	defer drop()
	payloads, err := writeRiverPayloads(o.drainEvents, round)
	if err != nil {
		return drainRound{}, err
	}
	defer os.Remove(payloads)
	rb, err := startRiverbench(ctx, o.river, "-database-url", withPoolSize(dbURL, riverPoolSize), "-sink", sink.url,
		"-jobs", strconv.Itoa(o.drainEvents), "-workers", strconv.Itoa(workers), "-payloads", payloads,
		"-fetch-cooldown", o.riverFetch.String(), "-control")
	if err != nil {
		return drainRound{}, err
	}
	defer rb.kill()
	if _, err := rb.next("seeded "); err != nil {
		return drainRound{}, err
	}
	sink.reset()
	pid := rb.cmd.Process.Pid
	riverCPU, selfCPU := processCPU(pid), processCPU(os.Getpid())
	pgCPU := backendsCPU(ctx, dbURL)
	startStat := readCPUStat()
	if _, err := io.WriteString(rb.stdin, "go\n"); err != nil {
		return drainRound{}, err
	}
	line, err := rb.next("riverbench ")
	if err != nil {
		return drainRound{}, err
	}
	var r drainRound
	r.idle = readCPUStat().idleSince(startStat)
	r.hookdCPU = processCPU(pid) - riverCPU
	r.sinkCPU = processCPU(os.Getpid()) - selfCPU
	r.postgresCPU = backendsCPU(ctx, dbURL).since(pgCPU)
	if r.rssMiB, err = peakRSS(pid); err != nil {
		return drainRound{}, err
	}
	done, err := riverDone(line, o.drainEvents)
	if err != nil {
		return drainRound{}, err
	}
	if got := sink.requests.Load(); got != int64(o.drainEvents) {
		return drainRound{}, fmt.Errorf("the sink got %d requests for %d jobs", got, o.drainEvents)
	}
	r.took = done.Sub(time.Unix(0, sink.first.Load()))
	r.perSecond = float64(o.drainEvents) / r.took.Seconds()
	return r, rb.finish()
}

// writeRiverPayloads writes n events like hookd's drain's to a new file,
// one JSON string a line, as riverbench's -payloads reads them, and
// returns its name.
func writeRiverPayloads(n, round int) (string, error) {
	payloads, err := os.CreateTemp("", "loadgen-river-*.jsonl")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(payloads)
	gen := newEventGen(fmt.Sprintf("evt_river_%s_r%d_", randomHex(4), round))
	for range n {
		line, _ := json.Marshal(string(gen.next()))
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := errors.Join(w.Flush(), payloads.Close()); err != nil {
		os.Remove(payloads.Name())
		return "", err
	}
	return payloads.Name(), nil
}

// riverbench is a running riverbench -control: it waits on stdin, and
// says how far it got on stdout.
type riverbench struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *e2etest.SyncBuffer
	exited bool
}

func startRiverbench(ctx context.Context, bin string, args ...string) (*riverbench, error) {
	rb := &riverbench{cmd: exec.CommandContext(ctx, bin, args...), stderr: &e2etest.SyncBuffer{}}
	rb.cmd.Stderr = rb.stderr
	var err error
	if rb.stdin, err = rb.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := rb.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := rb.cmd.Start(); err != nil {
		return nil, err
	}
	rb.lines = bufio.NewScanner(stdout)
	return rb, nil
}

// next reads stdout up to the line that starts with prefix and returns
// the rest of that line.
func (rb *riverbench) next(prefix string) (string, error) {
	for rb.lines.Scan() {
		if rest, ok := strings.CutPrefix(rb.lines.Text(), prefix); ok {
			return rest, nil
		}
	}
	return "", fmt.Errorf("no %q line: %v\n%s", prefix, rb.lines.Err(), rb.stderr)
}

// finish closes stdin, which lets riverbench stop, and waits for it.
func (rb *riverbench) finish() error {
	rb.stdin.Close()
	rb.exited = true
	if err := rb.cmd.Wait(); err != nil {
		return fmt.Errorf("%v\n%s", err, rb.stderr)
	}
	return nil
}

// kill stops a riverbench that has not finished.
func (rb *riverbench) kill() {
	if !rb.exited {
		rb.stdin.Close()
		_ = rb.cmd.Process.Kill()
		_ = rb.cmd.Wait()
	}
}

// riverDone reads riverbench's result line and returns when its last job
// was completed; a line that does not say all jobs completed is an error.
func riverDone(line string, jobs int) (time.Time, error) {
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	done, err := strconv.ParseInt(fields["done_unix_ns"], 10, 64)
	if err != nil || fields["completed"] != strconv.Itoa(jobs) {
		return time.Time{}, fmt.Errorf("unexpected result %q", line)
	}
	return time.Unix(0, done), nil
}

// drainOnce seeds n due events on t's database and times t's retry loop
// draining them to the sink.
func drainOnce(ctx context.Context, t *target, sink *sink, n, round int) (drainRound, error) {
	conn, err := pgx.Connect(ctx, t.dbURL)
	if err != nil {
		return drainRound{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sink.reset()
	// The CPU counts start just before the backlog commits: from then on
	// the retry loop may claim it.
	var hookdCPU, selfCPU time.Duration
	var pgCPU backendCPU
	if err := seedDue(ctx, conn, t, n, round, func() {
		hookdCPU, selfCPU = processCPU(t.h.cmd.Process.Pid), processCPU(os.Getpid())
		pgCPU = backendsCPU(ctx, t.dbURL)
	}); err != nil {
		return drainRound{}, err
	}
	r, err := timeDrain(ctx, conn, sink, n, t.drainBeside != "")
	if err != nil {
		return drainRound{}, err
	}
	r.hookdCPU = processCPU(t.h.cmd.Process.Pid) - hookdCPU
	r.sinkCPU = processCPU(os.Getpid()) - selfCPU
	r.postgresCPU = backendsCPU(ctx, t.dbURL).since(pgCPU)
	r.besideCalls = sink.besideCalls.Load()
	if t.drainBeside != "" {
		if err := settleBeside(ctx, conn, t); err != nil {
			return drainRound{}, err
		}
	}
	if got := sink.requests.Load(); got != int64(n) {
		return drainRound{}, fmt.Errorf("the sink got %d requests for %d events; %s's log:\n%s", got, n, t.bin, t.h.logs)
	}
	r.rssMiB, err = peakRSS(t.h.cmd.Process.Pid)
	return r, err
}

// seedDue puts n events on the retry queue, due now, each with the failed
// inline attempt that put it there, as the receiver would have left them. It
// calls beforeCommit just before they commit.
func seedDue(ctx context.Context, conn *pgx.Conn, t *target, n, round int, beforeCommit func()) error {
	gen := newEventGen(fmt.Sprintf("evt_drain_%s_r%d_", randomHex(4), round))
	events := make([][]any, n, 2*n)
	attempts := make([][]any, n)
	due := time.Now().Add(-time.Second)
	// The destination's columns only where the backlog is a destination's:
	// a binary of the release before has none.
	columns := []string{"source", "event_id", "event_type", "payload", "signature", "last_error", "next_retry_at"}
	if t.drainDest != "" {
		columns = append(columns, "destination", "order_key", "order_seq")
	}
	for i := range events {
		body := gen.next()
		id := gen.prefix + strconv.Itoa(gen.seq)
		sig := stripeevent.Sign(body, webhookSecret, time.Now())
		var key *string
		if t.drainOrdered {
			customer := gen.customer
			key = &customer
		}
		events[i] = []any{"stripe", id, "invoice.paid", string(body), sig, "downstream answered 503", due}
		if t.drainDest != "" {
			events[i] = append(events[i], t.drainDest, key, int64(i+1))
		}
		attempts[i] = []any{"stripe", id, 12.5, "failed", int32(503), "downstream answered 503", "inline", int32(0)}
		if t.drainBeside != "" {
			beside := append(slices.Clone(events[i][:len(events[i])-3]), t.drainBeside, nil, int64(n+i+1))
			events = append(events, beside)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"webhook_attempts"},
		[]string{"source", "event_id", "duration_ms", "outcome", "http_status", "error", "path", "attempt"},
		pgx.CopyFromRows(attempts)); err != nil {
		return fmt.Errorf("seed attempts: %w", err)
	}
	// One transaction: the retry loop sees the whole backlog at once.
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"webhook_events"}, columns, pgx.CopyFromRows(events)); err != nil {
		return fmt.Errorf("seed queue: %w", err)
	}
	// Analyzed before the commit (ANALYZE counts its own transaction's
	// rows), so that the retry loop plans its claims for the backlog, and
	// drains none of it before the CPU counts start.
	if _, err := tx.Exec(ctx, `ANALYZE webhook_events`); err != nil {
		return err
	}
	beforeCommit()
	return tx.Commit(ctx)
}

// timeDrain waits for the retry loop to drain n events and times it from
// the sink's first request until no queue row is left (of the sink's
// destination only, beside another).
func timeDrain(ctx context.Context, conn *pgx.Conn, sink *sink, n int, beside bool) (drainRound, error) {
	deadline := time.Now().Add(5 * time.Minute)
	var startStat cpuStat
	started := false
	for {
		if time.Now().After(deadline) {
			return drainRound{}, fmt.Errorf("drain not done after 5 minutes: the sink got %d of %d", sink.requests.Load(), n)
		}
		if err := ctx.Err(); err != nil {
			return drainRound{}, err
		}
		st := readCPUStat()
		got := sink.requests.Load()
		if !started && got > 0 {
			started, startStat = true, st
		}
		if got >= int64(n) {
			var left bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_events WHERE NOT $1 OR destination = $2)`,
				beside, orderedDest).Scan(&left); err != nil {
				return drainRound{}, err
			}
			if !left {
				end := time.Now()
				took := end.Sub(time.Unix(0, sink.first.Load()))
				return drainRound{
					perSecond: float64(n) / took.Seconds(),
					took:      took,
					idle:      readCPUStat().idleSince(startStat),
				}, nil
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sink is the user's app in the drain: it reads each request and answers 200.
type sink struct {
	url      string
	srv      *http.Server
	requests atomic.Int64
	first    atomic.Int64 // unix nanoseconds of the first request since reset
	// besideCalls counts the calls to a second destination's app on the
	// same server (-drain-failing), which answers failStatus on
	// besideFailingPath and 200 on besideHealthyPath.
	besideCalls atomic.Int64
	failStatus  int
}

func startSink(failStatus int) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String() + "/events", failStatus: failStatus}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case besideFailingPath:
			s.besideCalls.Add(1)
			w.WriteHeader(s.failStatus)
			return
		case besideHealthyPath:
			s.besideCalls.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		s.first.CompareAndSwap(0, time.Now().UnixNano())
		s.requests.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) reset() { s.requests.Store(0); s.first.Store(0); s.besideCalls.Store(0) }

func (s *sink) close() { _ = s.srv.Close() }

// hookd is a running server process: hookd serve, or the plain handler.
type hookd struct {
	cmd  *exec.Cmd
	url  string
	logs *e2etest.SyncBuffer
	done chan error

	stopOnce sync.Once
}

func startHookd(ctx context.Context, bin, dbURL string, env ...string) (*hookd, error) {
	return startServer(ctx, func(addr string) *exec.Cmd {
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "HOOKD_ADDR="+addr,
			"STRIPE_WEBHOOK_SECRET="+webhookSecret, "HOOKD_LOG_LEVEL=warn",
			// The default metrics address is one port for every hookd it starts.
			"HOOKD_METRICS_ADDR=127.0.0.1:0")
		cmd.Env = append(cmd.Env, env...)
		return cmd
	})
}

// startPlain starts the plain handler (e2e/loadgen/plainseed) on dbURL's
// database with a pool of maxConns connections.
func startPlain(ctx context.Context, bin, dbURL string, maxConns int) (*hookd, error) {
	return startServer(ctx, func(addr string) *exec.Cmd {
		cmd := exec.Command(bin, "-addr", addr)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+withPoolSize(dbURL, maxConns), "STRIPE_WEBHOOK_SECRET="+webhookSecret)
		return cmd
	})
}

// startServer starts the command command makes for a free address and
// waits until it answers /readyz there.
func startServer(ctx context.Context, command func(addr string) *exec.Cmd) (*hookd, error) {
	var lastErr error
	// A port picked by listening on :0 may be taken before the server binds it.
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		h, err := tryStartServer(ctx, command(fmt.Sprintf("127.0.0.1:%d", port)), port)
		if err == nil {
			return h, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStartServer(ctx context.Context, cmd *exec.Cmd, port int) (*hookd, error) {
	bin := cmd.Path
	h := &hookd{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &e2etest.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { h.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-h.done:
			return nil, fmt.Errorf("%s exited at start: %v\n%s", bin, err, h.logs)
		case <-ctx.Done():
			h.stop()
			return nil, ctx.Err()
		default:
		}
		resp, err := http.Get(h.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h, nil
			}
		}
		if time.Now().After(deadline) {
			h.stop()
			return nil, fmt.Errorf("%s not ready after 30 s\n%s", bin, h.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// 30 s. Calls after the first return at once.
func (h *hookd) stop() {
	h.stopOnce.Do(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			_ = h.cmd.Process.Kill()
			<-h.done
		}
	})
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// createDatabase makes an empty database on server for one phase and
// returns its URL and a func that drops it.
func createDatabase(ctx context.Context, server, phase string) (string, func(), error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, fmt.Errorf("-server: %v", err)
	}
	name := fmt.Sprintf("hookd_load_%s_%d", phase, os.Getpid())
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", u.Redacted(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: drop database:", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: drop database:", err)
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// riverPoolSize is riverbench's pool: hookd's default (database.go's
// defaultMaxConns), so that River drains on as many connections as hookd.
const riverPoolSize = 30

// withPoolSize returns dbURL with pgx's pool_max_conns set to n: every
// process loadgen starts takes its pool's size from its URL.
func withPoolSize(dbURL string, n int) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL // createDatabase made it: it parses
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// peakRSS returns the process's peak resident set (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read hookd's peak resident set: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// processCPU returns the user and system CPU time pid has used, from
// /proc/PID/stat, or 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// backendCPU is the CPU time each backend of one database has used.
type backendCPU map[int]time.Duration

// backendsCPU reads the CPU time of the PostgreSQL backends connected to
// dbURL's database (PostgreSQL runs on this machine), or nothing when it
// cannot.
func backendsCPU(ctx context.Context, dbURL string) backendCPU {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	cpu := backendCPU{}
	for _, pid := range pids {
		cpu[int(pid)] = processCPU(int(pid))
	}
	return cpu
}

// since returns the CPU time the backends used since start; a backend
// that started meanwhile counts whole.
func (b backendCPU) since(start backendCPU) time.Duration {
	var total time.Duration
	for pid, d := range b {
		total += d - start[pid]
	}
	return total
}

func perEvent(d time.Duration, events int) float64 {
	if events == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(events)
}

// cpuStat is the first line of /proc/stat: jiffies spent by all CPUs in
// each state since boot.
type cpuStat struct{ idle, total uint64 }

func readCPUStat() cpuStat {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuStat{}
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	var st cpuStat
	for i, field := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(field, 10, 64)
		if i >= 8 { // guest time is counted in user time already
			break
		}
		st.total += n
		if i == 3 || i == 4 { // idle, iowait
			st.idle += n
		}
	}
	return st
}

func (s cpuStat) idleSince(start cpuStat) float64 {
	if s.total <= start.total {
		return 0
	}
	return float64(s.idle-start.idle) / float64(s.total-start.total)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// describeMachine says what the figures were measured on.
func describeMachine(ctx context.Context, server string) string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	pg := "PostgreSQL ?"
	if conn, err := pgx.Connect(ctx, server); err == nil {
		var version, syncCommit string
		if conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit')`).
			Scan(&version, &syncCommit) == nil {
			pg = fmt.Sprintf("PostgreSQL %s (synchronous_commit %s)", version, syncCommit)
		}
		conn.Close(ctx)
	}
	return fmt.Sprintf("machine: %d CPUs (%s), %s, %s; load average %s",
		runtime.NumCPU(), model, pg, runtime.Version(), loadAverage())
}

func median[T any](rounds []T, f func(T) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = cryptorand.Read(b)
	return hex.EncodeToString(b)
}
