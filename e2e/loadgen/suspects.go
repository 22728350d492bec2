package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/stripeevent"
)

// Suspects (-suspects): what running suspects alone costs the replicas
// that do not run them. Three hookd replicas share one database and
// forward to an app in this process that answers at once, but suspects
// after -suspects-app. Each round has two phases of -round-time, in turn:
// before, -suspects-clients clients post fresh signed events to the three
// replicas (client c to replica c mod 3); while, the same, after
// -suspects-count suspects were put on the queue and the first of them
// reached the app, until the phase's time is up or the suspects are
// through. A delivery answered "processed" was delivered inline, by a
// replica that was not running suspects; one answered "deferred" went to
// the replica running them, which queues its deliveries meanwhile. The
// figures are the p50 and p99 of the "processed" answers in each phase,
// and the round's p99 while over before.

// suspectPrefix starts the ids of the suspects the app holds for
// -suspects-app; every other event it answers at once.
const suspectPrefix = "evt_suspect_"

// suspectApp is the user's app of the suspects rounds.
type suspectApp struct {
	url     string
	srv     *http.Server
	latency time.Duration
	// started and done count the suspects' requests that reached the app
	// and that it answered.
	started, done atomic.Int64
}

func startSuspectApp(latency time.Duration) (*suspectApp, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &suspectApp{url: "http://" + ln.Addr().String() + "/events", latency: latency}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.Header.Get("Hookd-Event-Id"), suspectPrefix) {
			a.started.Add(1)
			select {
			case <-time.After(a.latency):
			case <-r.Context().Done():
			}
			a.done.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *suspectApp) close() { _ = a.srv.Close() }

// phaseResult is one phase's figures: the latencies of the deliveries
// answered "processed", and how many were answered "deferred".
type phaseResult struct {
	processed []time.Duration
	deferred  int
	// suspects is how many suspects the app answered during the phase.
	suspects int64
}

func (p phaseResult) p(q int) time.Duration {
	if len(p.processed) == 0 {
		return 0
	}
	return p.processed[len(p.processed)*q/100]
}

func suspectRounds(ctx context.Context, o options) error {
	bin, _, _ := strings.Cut(o.hookd, ",")
	app, err := startSuspectApp(o.suspectsApp)
	if err != nil {
		return err
	}
	defer app.close()
	dbURL, drop, err := createDatabase(ctx, o.server, "suspects")
	if err != nil {
		return err
	}
	defer drop()
	var replicas []*hookd
	defer func() {
		for _, h := range replicas {
			h.stop()
		}
	}()
	// One at a time: the first applies the migrations.
	for range 3 {
		h, err := startHookd(ctx, bin, dbURL, "HOOKD_FORWARD_URL="+app.url)
		if err != nil {
			return err
		}
		replicas = append(replicas, h)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	fmt.Printf("suspects: 3 replicas of %s, %d clients; each round %s before, then %s while %d suspects run alone "+
		"(the app answers each in %s)\n", bin, o.suspectsClients, o.roundTime, o.roundTime, o.suspectsCount, o.suspectsApp)
	var before, while []phaseResult
	for i := range o.rounds {
		b, w, err := suspectRound(ctx, o, conn, app, replicas, i)
		if err != nil {
			return err
		}
		before, while = append(before, b), append(while, w)
		printSuspectRound(i, b, w)
	}
	printSuspectMedians(before, while)
	return nil
}

// suspectRound is one round: the phase before, then the phase while the
// suspects run, then a wait until every suspect is through.
func suspectRound(ctx context.Context, o options, conn *pgx.Conn, app *suspectApp, replicas []*hookd, round int) (
	before, while phaseResult, err error) {
	before, err = postPhase(ctx, replicas, o.suspectsClients, time.Now().Add(o.roundTime), fmt.Sprintf("b%d", round), nil)
	if err != nil {
		return before, while, fmt.Errorf("round %d, before: %w", round+1, err)
	}
	startedBefore, doneBefore := app.started.Load(), app.done.Load()
	if err := seedSuspects(ctx, conn, o.suspectsCount, round); err != nil {
		return before, while, err
	}
	if err := waitFor(ctx, time.Minute, "the first suspect in the app", func() (bool, error) {
		return app.started.Load() > startedBefore, nil
	}); err != nil {
		return before, while, err
	}
	through := func() bool { return app.done.Load()-doneBefore >= int64(o.suspectsCount) }
	atStart := app.done.Load()
	while, err = postPhase(ctx, replicas, o.suspectsClients, time.Now().Add(o.roundTime), fmt.Sprintf("w%d", round), through)
	if err != nil {
		return before, while, fmt.Errorf("round %d, while: %w", round+1, err)
	}
	while.suspects = app.done.Load() - atStart
	err = waitFor(ctx, 5*time.Minute, "every suspect through", func() (bool, error) {
		var open int64
		err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NULL`).Scan(&open)
		return open == 0 && through(), err
	})
	return before, while, err
}

// seedSuspects puts n events on the queue as a crash leaves the runs it
// cut short: due, charged nothing, each a suspect.
func seedSuspects(ctx context.Context, conn *pgx.Conn, n, round int) error {
	gen := newEventGen(fmt.Sprintf("%s%s_r%d_", suspectPrefix, randomHex(4), round))
	ids := make([]string, n)
	bodies := make([]string, n)
	for i := range ids {
		bodies[i] = string(gen.next())
		ids[i] = gen.prefix + strconv.Itoa(gen.seq)
	}
	_, err := conn.Exec(ctx, `
		WITH q AS (
			INSERT INTO webhook_events (source, event_id, event_type, payload, last_error, next_retry_at)
			SELECT 'stripe', id, 'invoice.paid', body, 'a run of this event was cut short', now() - interval '1 second'
			FROM unnest($1::text[], $2::text[]) AS d(id, body)
		)
		INSERT INTO webhook_suspects (event_id, path, interruptions) SELECT id, 'retry', 1 FROM unnest($1::text[]) AS id`,
		ids, bodies)
	if err != nil {
		return fmt.Errorf("seed suspects: %w", err)
	}
	return nil
}

// postPhase posts fresh events from clients clients, client c to replica
// c mod len(replicas), until deadline or until stop says so, and returns
// the latencies of the "processed" answers, sorted, and the count of the
// "deferred" ones. Any other answer is an error: every event is new.
func postPhase(ctx context.Context, replicas []*hookd, clients int, deadline time.Time, tag string, stop func() bool) (phaseResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		res      phaseResult
		firstErr error
		wg       sync.WaitGroup
	)
	prefix := fmt.Sprintf("evt_fast_%s_%s_", randomHex(4), tag)
	for c := range clients {
		u, err := url.Parse(replicas[c%len(replicas)].url + stripeevent.ReceiverPath)
		if err != nil {
			return res, err
		}
		wg.Go(func() {
			processed, deferred, err := postFast(ctx, u, fmt.Sprintf("%sc%d_", prefix, c), deadline, stop)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil && ctx.Err() == nil {
				firstErr = err
				cancel()
			}
			res.processed = append(res.processed, processed...)
			res.deferred += deferred
		})
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	if len(res.processed) == 0 {
		return res, errors.New("no delivery was processed inline")
	}
	slices.Sort(res.processed)
	return res, nil
}

// postFast is one client of postPhase, over one kept-alive connection.
func postFast(ctx context.Context, u *url.URL, prefix string, deadline time.Time, stop func() bool) (
	processed []time.Duration, deferred int, err error) {
	gen := newEventGen(prefix)
	client := &poster{addr: u.Host, path: u.Path}
	defer client.close()
	for time.Now().Before(deadline) && ctx.Err() == nil && (stop == nil || !stop()) {
		body := gen.next()
		sig := stripeevent.Sign(body, webhookSecret, time.Now())
		t0 := time.Now()
		status, answer, err := client.post(body, sig)
		took := time.Since(t0)
		if err != nil {
			return processed, deferred, err
		}
		switch answer := string(bytes.TrimSpace(answer)); {
		case status == http.StatusOK && answer == "processed":
			processed = append(processed, took)
		case status == http.StatusOK && answer == "deferred":
			deferred++
		default:
			return processed, deferred, fmt.Errorf("hookd answered %d: %s", status, answer)
		}
	}
	return processed, deferred, nil
}

// waitFor polls done every 50 ms until it reports true, it fails, ctx ends
// or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		switch {
		case err != nil:
			return fmt.Errorf("wait for %s: %w", what, err)
		case ok:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("no %s after %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func printSuspectRound(i int, before, while phaseResult) {
	fmt.Printf("round %d  before: %d processed, p50 %.2f ms, p99 %.2f ms | while (%d suspects through): %d processed, %d deferred, "+
		"p50 %.2f ms, p99 %.2f ms | p99 while/before %.2f\n", i+1, len(before.processed), ms(before.p(50)), ms(before.p(99)),
		while.suspects, len(while.processed), while.deferred, ms(while.p(50)), ms(while.p(99)), ratioP99(before, while))
}

func ratioP99(before, while phaseResult) float64 {
	return ms(while.p(99)) / ms(before.p(99))
}

func printSuspectMedians(before, while []phaseResult) {
	pct := func(rounds []phaseResult, q int) float64 {
		return median(rounds, func(r phaseResult) float64 { return ms(r.p(q)) })
	}
	ratios := make([]float64, len(before))
	for i := range before {
		ratios[i] = ratioP99(before[i], while[i])
	}
	fmt.Printf("suspects medians: before p50 %.2f ms, p99 %.2f ms; while p50 %.2f ms, p99 %.2f ms; p99 while/before %.2f\n",
		pct(before, 50), pct(before, 99), pct(while, 50), pct(while, 99), median(ratios, func(r float64) float64 { return r }))
}

// suspectCosts (-suspects-cost) times what a crash costs on one replica:
// -suspects-count suspects put on its queue at once, from their commit
// until the last is through, first with the app answering each after
// -suspects-app, then with an app that never answers, so that each run
// alone ends at hookd's default HOOKD_FORWARD_TIMEOUT. An app that never
// answers opens the circuit breaker after HOOKD_BREAKER_FAILURES runs in a
// row, which holds the other suspects until it answers again: that run
// stops there, saying how many were through by then.
func suspectCosts(ctx context.Context, o options) error {
	for _, latency := range []time.Duration{o.suspectsApp, 24 * time.Hour} {
		c, err := suspectCost(ctx, o, latency)
		if err != nil {
			return err
		}
		app := "answering " + latency.String()
		if latency == 24*time.Hour {
			app = "never answering (each run alone ends at the default HOOKD_FORWARD_TIMEOUT)"
		}
		fmt.Printf("suspects cost: %d suspects on one replica, the app %s: %d through %.1f s after they were queued",
			o.suspectsCount, app, c.through, c.took.Seconds())
		if c.breakerOpen {
			fmt.Printf("; then the circuit breaker opened and holds the other %d until the app answers", int64(o.suspectsCount)-c.through)
		}
		fmt.Println()
	}
	return nil
}

// costResult is one run of suspectCost: how many suspects were through,
// and how long after they were queued, when all were or when the circuit
// breaker opened.
type costResult struct {
	took        time.Duration
	through     int64
	breakerOpen bool
}

func suspectCost(ctx context.Context, o options, latency time.Duration) (costResult, error) {
	bin, _, _ := strings.Cut(o.hookd, ",")
	app, err := startSuspectApp(latency)
	if err != nil {
		return costResult{}, err
	}
	defer app.close()
	dbURL, drop, err := createDatabase(ctx, o.server, "suspectcost")
	if err != nil {
		return costResult{}, err
	}
	defer drop()
	h, err := startHookd(ctx, bin, dbURL, "HOOKD_FORWARD_URL="+app.url)
	if err != nil {
		return costResult{}, err
	}
	defer h.stop()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return costResult{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := seedSuspects(ctx, conn, o.suspectsCount, 0); err != nil {
		return costResult{}, err
	}
	start := time.Now()
	var c costResult
	err = waitFor(ctx, time.Hour, "every suspect through, or the circuit breaker open", func() (bool, error) {
		err := conn.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NOT NULL),
			       coalesce((SELECT breaker_opened_at IS NOT NULL FROM delivery_control), false)`).Scan(&c.through, &c.breakerOpen)
		c.took = time.Since(start)
		return c.through == int64(o.suspectsCount) || c.breakerOpen, err
	})
	return c, err
}
