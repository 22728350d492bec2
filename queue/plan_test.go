package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The queue's hot queries must be able to use their indexes. Each case calls
// the store method itself and EXPLAINs the statements it really sent, so a
// changed query is checked as it now is. The test tables are tiny, where a
// sequential scan is cheapest, so sequential scans are switched off: what is
// left shows whether an index serves the query.
func TestQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t, withRecorder())
	pool, rec := bundle.pool, bundle.rec
	ctx := t.Context()

	cases := []struct {
		name, table, index string
		run                func(context.Context) error
	}{
		{"ClaimDue", "webhook_events", "webhook_events_due_idx", func(ctx context.Context) error {
			_, err := queuetest.NewSeed(store).ClaimDue(ctx, 10, queuetest.DefaultClaimWindow)
			return err
		}},
		{"DeadEvents", "webhook_events", "webhook_events_dead_idx", func(ctx context.Context) error {
			_, err := queuetest.NewSeed(store).DeadEvents(ctx, 50, 0)
			return err
		}},
		{"PruneProcessed", "processed_webhook_events", "processed_webhook_events_processed_at_brin", func(ctx context.Context) error {
			_, err := store.PruneProcessed(ctx, 30*24*time.Hour)
			return err
		}},
		{"IsProcessed", "processed_webhook_events", "processed_webhook_events_pkey", func(ctx context.Context) error {
			_, err := queuetest.NewSeed(store).IsProcessed(ctx, "evt_1")
			return err
		}},
		{"FailedMembers", "replay_events", "replay_events_pkey", func(ctx context.Context) error {
			_, err := store.FailedMembers(ctx, 1)
			return err
		}},
	}
	for _, tc := range cases {
		rec.Take("")
		if err := tc.run(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		queries := rec.Take(tc.table)
		if len(queries) == 0 {
			t.Fatalf("%s ran no statement on %s", tc.name, tc.table)
		}
		used := false
		for _, q := range queries {
			plan := explainWithoutSeqScan(t, pool, q)
			used = used || plan.Uses(tc.index)
			t.Logf("%s:\n%s", tc.name, plan)
		}
		if !used {
			t.Errorf("%s does not use %s", tc.name, tc.index)
		}
	}
}

// explainWithoutSeqScan plans q in a transaction that forbids sequential
// scans, rolled back so the setting never reaches the pool's connections.
func explainWithoutSeqScan(t *testing.T, pool *pgxpool.Pool, q queuetest.RecordedQuery) queuetest.PlanNode {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	return queuetest.Explain(t, tx, q)
}

// The short transactions of a batch of deliveries run on plans made once
// per connection: each
// statement takes its ids as an array, which would otherwise make
// PostgreSQL plan it anew at every batch. The plans are made at the first
// batch, on empty tables, where a sequential scan is cheapest; they must
// still find events by their unique indexes once the tables are large.
func TestTakeDeliveries_PlansOnceWithTheIndexes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// Plans belong to a connection: every batch, and then the look at its
	// plans, run on this one.
	store, bundle := setup(t, withOneConnection())
	pool := bundle.pool

	const batches = 8
	for i := range batches {
		processed, deferred := fmt.Sprintf("evt_plan_%d_ok", i), fmt.Sprintf("evt_plan_%d_later", i)
		leased, err := store.TakeDeliveries(ctx, queue.SourceStripe, []queue.Delivery{
			{EventID: processed, Path: queue.PathInline}, {EventID: deferred, Path: queue.PathInline}}, time.Second)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if leased.States[0] != queue.DeliveryNew || leased.States[1] != queue.DeliveryNew {
			t.Fatalf("batch %d: states %v, want both new", i, leased.States)
		}
		_, err = store.SettleDeliveries(ctx, []queue.Received{
			{EventID: processed, Owner: leased.Owner},
			{EventID: deferred, Owner: leased.Owner, Queue: &queue.FailedEvent{
				Source: queue.SourceStripe, EventID: deferred, EventType: "invoice.paid",
				Payload: []byte(`{"id":"` + deferred + `"}`), Error: "app busy",
			}},
		})
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}

	rows, err := pool.Query(ctx, `
		SELECT name, statement, parameter_types::text, generic_plans, custom_plans
		FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	type prepared struct {
		name, sql, params string
		generic, custom   int64
	}
	var statesRead *prepared
	for rows.Next() {
		var p prepared
		if err := rows.Scan(&p.name, &p.sql, &p.params, &p.generic, &p.custom); err != nil {
			t.Fatal(err)
		}
		if p.custom > 0 {
			t.Errorf("planned anew %d times in %d batches:%s", p.custom, batches, p.sql)
		}
		// The reread after the take (recheckTakenSQL: source, ids, owner);
		// the take reads the same way, with more parameters.
		if strings.Contains(p.sql, "processed_webhook_events m") && strings.Contains(p.sql, "webhook_events e") &&
			p.params == "{text,text[],uuid}" {
			statesRead = &p
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if statesRead == nil {
		t.Fatal("no prepared statement reads the events' states")
	}
	if statesRead.generic != batches {
		t.Errorf("the state read ran on its one plan %d times, want %d", statesRead.generic, batches)
	}

	// The plan the batches made on empty tables must still look events up
	// one by one now that the tables hold thousands of rows. EXPLAIN
	// EXECUTE runs the cached generic plan; a plan made now instead would
	// know the tables' sizes.
	if _, err := pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id) SELECT 'evt_many_' || g FROM generate_series(1, 5000) g;
		INSERT INTO webhook_events (source, event_id, event_type, payload)
		SELECT 'stripe', 'evt_many_' || g, 'invoice.paid', '{}' FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	var raw string
	ids := []string{"evt_many_1", "evt_many_2", "evt_plan_x"}
	explain := fmt.Sprintf(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s('stripe', '{%s}', '%s')`,
		statesRead.name, strings.Join(ids, ","), uuid.New())
	if err := tx.QueryRow(ctx, explain).Scan(&raw); err != nil {
		t.Fatalf("explain the state read %s: %v", statesRead.params, err)
	}
	plan := queuetest.ParsePlan(t, []byte(raw))
	t.Logf("state read:\n%s", plan)
	for _, index := range []string{"processed_webhook_events_pkey", "webhook_events_delivery_key"} {
		if !plan.Uses(index) {
			t.Errorf("the state read does not use %s", index)
		}
	}
	read := 0.0
	plan.Walk(func(n queuetest.PlanNode) {
		if n.Relation != "" || n.Index != "" {
			read += n.ActualRows * n.ActualLoops
		}
	})
	// At most one marker and one queue row per id.
	if read > float64(2*len(ids)) {
		t.Errorf("the state read of %d ids read %.0f rows, want at most %d", len(ids), read, 2*len(ids))
	}
}

// The retry loop's claim is planned for the backlog it claims from. Open
// suspects are rare, and leaving them out must neither make PostgreSQL
// expect a handful of due events (a claim so planned sorted the whole
// backlog, or joined its batch with itself row by row) nor read
// webhook_suspects once per candidate. And SuspectsWaiting, asked at every
// poll of every replica, reads nothing of the queue while no suspect is
// open.
func TestClaimAttempts_PlannedForTheBacklogWhileNoSuspectIsOpen(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t, withRecorder())
	pool, rec := bundle.pool, bundle.rec
	ctx := t.Context()

	const backlog, batch = 4000, 300
	// A suspect cleared long ago stays in webhook_suspects, for its
	// event's page.
	claimSQL := recordClaim(t, store, bundle, backlog, batch, "webhook_events",
		`INSERT INTO webhook_suspects (event_id, path, interruptions, cleared_at) VALUES ('evt_due_7', 'retry', 1, now())`,
		`ANALYZE webhook_events, webhook_suspects`)
	plan := explainAnalyzed(t, pool, claimSQL)
	t.Logf("claim:\n%s", plan)
	due := -1.0
	plan.Walk(func(n queuetest.PlanNode) {
		if n.Relation == "webhook_events" && n.Index == "webhook_events_due_idx" {
			due = n.PlanRows
		}
		if n.Relation == "webhook_suspects" && n.ActualLoops > 1 {
			t.Errorf("the claim read webhook_suspects %.0f times, once per candidate", n.ActualLoops)
		}
	})
	if due < 0 {
		t.Fatal("the claim does not read the due events through webhook_events_due_idx")
	}
	if left := float64(backlog - batch); due < left/2 {
		t.Errorf("the claim was planned for %.0f due events of the %.0f due", due, left)
	}

	rec.Take("")
	if waiting, err := store.SuspectsWaiting(ctx, true); err != nil || waiting {
		t.Fatalf("SuspectsWaiting = %v, %v; want false, nil", waiting, err)
	}
	asked := rec.Take("webhook_suspects")
	if len(asked) != 1 {
		t.Fatalf("SuspectsWaiting sent %d statements, want 1", len(asked))
	}
	plan = explainAnalyzed(t, pool, asked[0])
	t.Logf("suspects waiting:\n%s", plan)
	plan.Walk(func(n queuetest.PlanNode) {
		if n.Relation == "webhook_events" && n.ActualLoops > 0 {
			t.Errorf("SuspectsWaiting read the queue (%s) with no suspect open", n.NodeType)
		}
	})
}

// explainAnalyzed runs q under EXPLAIN ANALYZE, with its recorded
// recordClaim puts backlog due events on the queue, runs the statements
// of more, claims batch of them with ClaimAttempts, and returns the claim
// statement as the recorder saw it among the statements on table.
func recordClaim(t *testing.T, store *queue.Store, bundle *testBundle, backlog, batch int, table string,
	more ...string) queuetest.RecordedQuery {
	t.Helper()
	ctx := t.Context()
	seed := `INSERT INTO webhook_events (source, event_id, event_type, payload, next_retry_at)
		 SELECT 'stripe', 'evt_due_' || g, 'invoice.paid', '{}', now() - interval '1 minute'
		 FROM generate_series(1, ` + strconv.Itoa(backlog) + `) g`
	for _, sql := range append([]string{seed}, more...) {
		if _, err := bundle.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	bundle.rec.Take("")
	claim, err := store.ClaimAttempts(ctx, batch, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Claimed) != batch {
		t.Fatalf("claimed %d events, want %d", len(claim.Claimed), batch)
	}
	for _, q := range bundle.rec.Take(table) {
		if strings.HasPrefix(q.SQL, "-- hookd.claim\n") {
			return q
		}
	}
	t.Fatal("ClaimAttempts sent no claim statement")
	return queuetest.RecordedQuery{}
}

// arguments, in a transaction rolled back.
func explainAnalyzed(t *testing.T, pool *pgxpool.Pool, q queuetest.RecordedQuery) queuetest.PlanNode {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var raw []byte
	if err := tx.QueryRow(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) "+q.SQL, q.Args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", q.SQL, err)
	}
	return queuetest.ParsePlan(t, raw)
}

// The retry loop's claim finds each due delivery's lease by the key of
// webhook_leases, whatever that table holds. A claim that compared the
// queue's lease_key, a "C" column, with the leases' keys, in the
// database's collation, compared them in "C", which webhook_leases_pkey
// does not serve: PostgreSQL planned a read of every lease for each due
// row, and a plan that costly is compiled (JIT) each time it runs, which
// took most of a drain's database CPU. The plan's cost must stay below half
// of jit_above_cost with as many leases as a drain of 20,000 events leaves
// behind it (it was seven times jit_above_cost).
func TestClaimAttempts_LooksUpLeasesByKey(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t, withRecorder())
	pool := bundle.pool
	ctx := t.Context()

	const backlog, batch, leases = 4000, 500, 20000
	claimSQL := recordClaim(t, store, bundle, backlog, batch, "webhook_leases",
		`INSERT INTO webhook_leases (event_id, owner, path, expires_at)
		 SELECT 'evt_busy_' || g, gen_random_uuid(), 'inline', now() + interval '1 minute'
		 FROM generate_series(1, `+strconv.Itoa(leases)+`) g`,
		`ANALYZE webhook_events, webhook_leases`)
	var jitAbove float64
	if err := pool.QueryRow(ctx, `SELECT current_setting('jit_above_cost')::float8`).Scan(&jitAbove); err != nil {
		t.Fatal(err)
	}
	plan := queuetest.Explain(t, pool, claimSQL)
	t.Logf("claim, cost %.0f:\n%s", plan.TotalCost, plan)
	if plan.TotalCost >= jitAbove/2 {
		t.Errorf("the claim of %d due events, with %d leases held, is planned at cost %.0f (jit_above_cost %.0f)",
			batch, leases, plan.TotalCost, jitAbove)
	}
}
