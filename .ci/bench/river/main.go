// Command riverbench is the peer of hookd's retry drain in `make bench-load`:
// a River burn-down whose worker POSTs each job's payload to an HTTP sink,
// as hookd's forward processor does. It lives in a module of its own so
// that River is never a dependency of hookd.
//
// On an empty database it runs River's migrations, inserts -jobs jobs at
// once (InsertManyFast), then starts a client with -workers workers and
// waits until River has marked every job completed. It prints one line:
//
//	riverbench jobs=20000 workers=100 completed=20000 failed=0 first_request_unix_ns=... done_unix_ns=... seconds=3.512 jobs_per_second=5695
//
// timed from its first request to the sink until the last completion was
// written. With -control, it prints "seeded jobs=N" once the jobs are
// inserted and waits for a line on stdin before it starts the client, and
// after its result it waits for stdin to close before it stops: the load
// generator reads its CPU and peak resident set meanwhile. -payloads names
// a file of payloads, one JSON string a line (the load generator's events);
// without it every job carries the same 1.5 KB event.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ForwardArgs is a job: one event's payload. It is a JSON string, not raw
// JSON, so that the bytes posted are the bytes inserted (jsonb would
// reorder the event's keys).
type ForwardArgs struct {
	EventID string `json:"event_id"`
	Payload string `json:"payload"`
}

func (ForwardArgs) Kind() string { return "forward" }

// ForwardWorker POSTs a job's payload to the sink; a 2xx answer completes
// the job, anything else fails the attempt.
type ForwardWorker struct {
	river.WorkerDefaults[ForwardArgs]
	url    string
	client *http.Client
	first  atomic.Int64 // unix nanoseconds of the first request
}

func (w *ForwardWorker) Work(ctx context.Context, job *river.Job[ForwardArgs]) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, strings.NewReader(job.Args.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "riverbench")
	req.Header.Set("Hookd-Event-Id", job.Args.EventID)
	w.first.CompareAndSwap(0, time.Now().UnixNano())
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("sink answered %d", resp.StatusCode)
	}
	return nil
}

func main() {
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"),
		"PostgreSQL URL of an empty database, its pool_max_conns the pool's size (default $DATABASE_URL)")
	sink := flag.String("sink", "", "URL each job's payload is POSTed to")
	jobs := flag.Int("jobs", 20_000, "jobs inserted, then drained")
	workers := flag.Int("workers", 100, "River workers (MaxWorkers of the one queue)")
	payloads := flag.String("payloads", "", "file of payloads, one JSON string a line; cycled when fewer than -jobs")
	cooldown := flag.Duration("fetch-cooldown", river.FetchCooldownDefault, "River's FetchCooldown: at most one fetch of jobs this often")
	control := flag.Bool("control", false, `print "seeded" and wait for a line on stdin before draining; wait for stdin to close before exiting`)
	flag.Parse()
	if *dbURL == "" || *sink == "" || *jobs < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "riverbench: -database-url, -sink, -jobs and -workers are required")
		os.Exit(2)
	}
	if err := run(context.Background(), *dbURL, *sink, *jobs, *workers, *cooldown, *payloads, *control); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dbURL, sink string, jobs, workers int, cooldown time.Duration, payloadFile string, control bool) error {
	bodies, err := readPayloads(payloadFile)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	worker := newForwardWorker(sink, workers)
	client, err := newClient(pool, worker, workers, cooldown)
	if err != nil {
		return err
	}
	if err := insertJobs(ctx, client, pool, bodies, jobs); err != nil {
		return err
	}

	stdin := bufio.NewReader(os.Stdin)
	if control {
		fmt.Printf("seeded jobs=%d\n", jobs)
		if _, err := stdin.ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for the go-ahead: %w", err)
		}
	}
	completed, failed, err := drain(ctx, client, jobs)
	if err != nil {
		return err
	}
	done := time.Now()
	first := time.Unix(0, worker.first.Load())
	took := done.Sub(first)
	fmt.Printf("riverbench jobs=%d workers=%d completed=%d failed=%d first_request_unix_ns=%d done_unix_ns=%d seconds=%.3f jobs_per_second=%.0f\n",
		jobs, workers, completed, failed, first.UnixNano(), done.UnixNano(), took.Seconds(), float64(jobs)/took.Seconds())

	if control {
		_, _ = io.Copy(io.Discard, stdin)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

// newForwardWorker returns the worker that POSTs to sink, with a kept-alive
// connection for each of workers.
func newForwardWorker(sink string, workers int) *ForwardWorker {
	return &ForwardWorker{url: sink, client: &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			// One kept-alive connection per worker: fewer would open and
			// close connections under the burn-down.
			MaxIdleConnsPerHost: workers,
			IdleConnTimeout:     90 * time.Second,
		},
		Timeout: time.Minute,
	}}
}

// newClient returns a River client of one queue run by worker, workers at
// a time.
func newClient(pool *pgxpool.Pool, worker *ForwardWorker, workers int, cooldown time.Duration) (*river.Client[pgx.Tx], error) {
	registry := river.NewWorkers()
	river.AddWorker(registry, worker)
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:       registry,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// insertJobs inserts jobs jobs at once, cycling through bodies, and
// analyzes the job table so that River plans its fetches for the backlog,
// as hookd's drain is planned for its own.
func insertJobs(ctx context.Context, client *river.Client[pgx.Tx], pool *pgxpool.Pool, bodies []string, jobs int) error {
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		body := bodies[i%len(bodies)]
		params[i] = river.InsertManyParams{Args: ForwardArgs{EventID: eventID(body, i), Payload: body}}
	}
	if _, err := client.InsertManyFast(ctx, params); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	_, err := pool.Exec(ctx, `ANALYZE river_job`)
	return err
}

// drain starts the client and counts its completions until jobs jobs are
// completed, or 5 minutes have passed; it returns the completions and the
// failed attempts.
func drain(ctx context.Context, client *river.Client[pgx.Tx], jobs int) (completed, failed int, err error) {
	// The channel holds every event, so that none is dropped.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	timeout := time.NewTimer(5 * time.Minute)
	for completed < jobs {
		select {
		case e := <-events:
			if e.Kind == river.EventKindJobCompleted {
				completed++
			} else {
				failed++
			}
		case <-timeout.C:
			return completed, failed, fmt.Errorf("%d of %d jobs completed after 5 minutes (%d failed attempts)", completed, jobs, failed)
		}
	}
	return completed, failed, nil
}

// readPayloads reads a file of JSON strings, one a line, or makes one
// event of about 1.5 KB when there is no file.
func readPayloads(file string) ([]string, error) {
	if file == "" {
		pad := strings.Repeat("0123456789abcdef", 64)
		return []string{fmt.Sprintf(`{"id":"evt_riverbench","object":"event","api_version":"2025-03-31.basil","created":%d,`+
			`"data":{"object":{"id":"in_riverbench","object":"invoice","metadata":{"note":%q}}},"livemode":false,`+
			`"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"invoice.paid"}`,
			time.Now().Unix(), pad)}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var bodies []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("%s: not a JSON string a line: %w", file, err)
		}
		bodies = append(bodies, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(bodies) == 0 {
		return nil, errors.New(file + ": no payloads")
	}
	return bodies, nil
}

// eventID is the event's id, for the header hookd sends too; the job's
// index when the payload has none.
func eventID(payload string, i int) string {
	var e struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(payload), &e) == nil && e.ID != "" {
		return e.ID
	}
	return fmt.Sprintf("evt_riverbench_%d", i)
}
