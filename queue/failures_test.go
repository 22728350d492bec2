package queue_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestFailureGroups_ErrorsThatDifferOnlyInIdsAndNumbersAreOneGroup(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	insert := func(typ string, status queue.Status, lastError string) {
		attempts := 0
		if status == queue.StatusDead {
			attempts = queue.MaxAttempts
		}
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventType: typ, Status: status, Attempts: attempts, LastError: lastError})
	}
	// One cause, five wordings: ids, numbers, a uuid, a timestamp and a
	// request id differ.
	insert("invoice.paid", queue.StatusFailed, "timeout after 10s for evt_A")
	insert("invoice.paid", queue.StatusRetrying, "timeout after 12s for evt_B")
	insert("invoice.paid", queue.StatusDead, "timeout after 9s for evt_1QbX7fLkdIwHu7ixXY0pQ3rS")
	insert("invoice.paid", queue.StatusDead, "timeout after 300s for evt_test_0a1b2c3d4e5f6a7b")
	// The same error on another event type is the same failure.
	insert("charge.refunded", queue.StatusFailed, "timeout after 10s for evt_C")
	// Ids of other objects, a uuid, a timestamp and hex are masked too.
	insert("invoice.paid", queue.StatusFailed,
		`downstream answered 500: {"error":"customer cus_NffrFeUfNV2Hib","req":"3fa85f64-5717-4562-b3fc-2c963f66afa6","at":"2026-11-30T05:58:40Z","trace":"9f86d081884c7d65"}`)
	insert("invoice.paid", queue.StatusRetrying,
		`downstream answered 500: {"error":"customer cus_Qa81kdPq0","req":"0c1f2a3b-0000-4000-8000-00000000beef","at":"2026-12-01T17:03:09.125+01:00","trace":"0000aaaa1111bbbb"}`)
	// The forwarder's HTTP status is kept: a 503 is not a 500.
	insert("invoice.paid", queue.StatusFailed,
		`downstream answered 503: {"error":"customer cus_NffrFeUfNV2Hib","req":"3fa85f64-5717-4562-b3fc-2c963f66afa6","at":"2026-11-30T05:58:40Z","trace":"9f86d081884c7d65"}`)
	// Words with underscores are not ids.
	insert("invoice.paid", queue.StatusFailed, "read_timeout on payment_intent.succeeded")

	// One cause is one group whatever types it hit; the type filter
	// narrows every group to one type.
	type counts struct{ failed, retrying, dead int64 }
	timeout, down500, down503 := "timeout after <n>s for <id>",
		`downstream answered 500: {"error":"customer <id>","req":"<uuid>","at":"<time>","trace":"<hex>"}`,
		`downstream answered 503: {"error":"customer <id>","req":"<uuid>","at":"<time>","trace":"<hex>"}`
	for _, c := range []struct {
		eventType string
		want      map[string]counts
		types     string
	}{
		{"", map[string]counts{timeout: {2, 1, 2}, down500: {1, 1, 0}, down503: {1, 0, 0},
			"read_timeout on payment_intent.succeeded": {1, 0, 0}}, "[{invoice.paid 4} {charge.refunded 1}]"},
		{"invoice.paid", map[string]counts{timeout: {1, 1, 2}, down500: {1, 1, 0}, down503: {1, 0, 0},
			"read_timeout on payment_intent.succeeded": {1, 0, 0}}, "[{invoice.paid 4}]"},
		{"charge.refunded", map[string]counts{timeout: {1, 0, 0}}, "[{charge.refunded 1}]"},
	} {
		groups, total, err := s.FailureGroups(ctx, 100, c.eventType, "")
		if err != nil {
			t.Fatal(err)
		}
		if total != int64(len(c.want)) || len(groups) != len(c.want) {
			t.Errorf("type %q: got %d groups (%d returned), want %d:", c.eventType, total, len(groups), len(c.want))
			for _, g := range groups {
				t.Logf("  %q %v: %d/%d/%d", g.ErrorGroup, g.Types, g.Failed, g.Retrying, g.Dead)
			}
		}
		for _, g := range groups {
			w, ok := c.want[g.ErrorGroup]
			if !ok {
				t.Errorf("type %q: unexpected group %q", c.eventType, g.ErrorGroup)
				continue
			}
			if g.Failed != w.failed || g.Retrying != w.retrying || g.Dead != w.dead || g.EventType != c.eventType {
				t.Errorf("type %q: group %q: failed/retrying/dead %d/%d/%d of type %q, want %d/%d/%d",
					c.eventType, g.ErrorGroup, g.Failed, g.Retrying, g.Dead, g.EventType, w.failed, w.retrying, w.dead)
			}
		}
		if groups[0].ErrorGroup != timeout || fmt.Sprint(groups[0].Types) != c.types {
			t.Errorf("type %q: first group is %q of %v, want the largest, the timeouts, of %s",
				c.eventType, groups[0].ErrorGroup, groups[0].Types, c.types)
		}
		if groups[0].LastSeen.Before(groups[0].FirstSeen) {
			t.Errorf("last seen %s before first seen %s", groups[0].LastSeen, groups[0].FirstSeen)
		}
	}
}

func TestFailureGroups_GroupFollowsTheLastError(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{LastError: "downstream answered 500: boom"})
	if _, err := queuetest.NewSeed(s).ScheduleRetry(ctx, e.ID, 1, "no answer from downstream: dial tcp 127.0.0.1:4242: connect: connection refused"); err != nil {
		t.Fatal(err)
	}
	groups, _, err := s.FailureGroups(ctx, 10, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := "no answer from downstream: dial tcp <n>.<n>.<n>.<n>:<n>: connect: connection refused"
	if len(groups) != 1 || groups[0].ErrorGroup != want || groups[0].Retrying != 1 {
		t.Fatalf("got %+v, want one retrying group %q", groups, want)
	}
	// The group is a filter on the lists and on the bulk retries.
	n, err := s.CountEvents(ctx, groups[0].Filter(queue.StatusPending))
	if err != nil || n != 1 {
		t.Fatalf("count of the group's pending events: %d, %v; want 1", n, err)
	}
}

func TestRetryNowMatching_MakesOnlyMatchingPendingEventsDue(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	match := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2,
		DueIn: 3600e9, LastError: "timeout for evt_A"})
	other := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2,
		DueIn: 3600e9, LastError: "downstream answered 500"})
	dead := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5,
		DueIn: 3600e9, LastError: "timeout for evt_B"})
	// A matching event whose attempt is running is only marked: it stays
	// due when it was, and the count says so.
	running := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2,
		DueIn: 3600e9, LastError: "timeout for evt_C"})
	if _, err := queuetest.NewSeed(s).TryLockEvent(ctx, running.EventID); err != nil {
		t.Fatal(err)
	}
	h, err := s.RetryNowMatching(ctx, queue.EventFilter{EventType: "invoice.paid", ErrorGroup: "timeout for <id>"})
	if want := (queue.Hastened{DueNow: 1, DueAfterAttempt: 1}); err != nil || h != want {
		t.Fatalf("RetryNowMatching: %+v, %v; want %+v", h, err, want)
	}
	if got, err := s.Event(ctx, running.ID); err != nil || !got.ManualRetry || !got.NextRetryAt.Equal(running.NextRetryAt) {
		t.Errorf("the event in flight: manual %v, due %v (%v); want marked manual, due unchanged at %v",
			got.ManualRetry, got.NextRetryAt, err, running.NextRetryAt)
	}
	for _, tc := range []struct {
		e       queue.Event
		hurried bool
	}{{match, true}, {other, false}, {dead, false}} {
		got, err := s.Event(ctx, tc.e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ManualRetry != tc.hurried || got.Attempts != tc.e.Attempts || got.Status != tc.e.Status {
			t.Errorf("%s: manual %v, attempts %d, status %s; want manual %v and attempts, status unchanged",
				deref(tc.e.LastError), got.ManualRetry, got.Attempts, got.Status, tc.hurried)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The mask turns each variable token into one placeholder, and a number
// into <n> whatever its length: a reference that grows from 7 digits to 8
// must not move its events to another group.
func TestErrorGroupMask_EachTokenMaskedOnceWhateverItsLength(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	type mask struct{ in, want string }
	var cases []mask
	const digits = "98765432109876543210"
	for n := 1; n <= len(digits); n++ {
		d, zeros := digits[:n], strings.Repeat("0", n)
		cases = append(cases,
			mask{"timeout after 10s ref=" + d, "timeout after <n>s ref=<n>"},
			mask{d + " rows locked", "<n> rows locked"},
			mask{`{"order":` + zeros + `,"took":"` + d + `ms"}`, `{"order":<n>,"took":"<n>ms"}`},
			mask{"downstream answered 500: order " + d, "downstream answered 500: order <n>"},
		)
	}
	cases = append(cases,
		// Hex runs of 8 or more with a digit and a letter, in either case,
		// starting with either.
		mask{"trace 9f86d081", "trace <hex>"},
		mask{"trace 9f86d081884c7d65", "trace <hex>"},
		mask{"trace 9F86D081884C7D65", "trace <hex>"},
		mask{"trace deadbeef00", "trace <hex>"},
		mask{"sha da39a3ee5e6b4b0d3255bfef95601890afd80709 bad", "sha <hex> bad"},
		mask{"trace 0000aaaa1111bbbb", "trace <hex>"},
		// Without a letter it is a number; without a digit, a word.
		mask{"trace 0000000011111111", "trace <n>"},
		mask{"trace deadbeef", "trace deadbeef"},
		mask{"decaffed coffee", "decaffed coffee"},
		// Shorter hex runs are left to the number rule, as before.
		mask{"trace abc1234", "trace abc1234"},
		// 0x forms, whatever follows.
		mask{"at 0x1", "at <hex>"},
		mask{"at 0x12345678", "at <hex>"},
		mask{"at 0xdeadbeef", "at <hex>"},
		mask{"at 0xDEADBEEF0123456789", "at <hex>"},
		// uuids, even all digits.
		mask{"req 3fa85f64-5717-4562-b3fc-2c963f66afa6", "req <uuid>"},
		mask{"req 3FA85F64-5717-4562-B3FC-2C963F66AFA6", "req <uuid>"},
		mask{"req 00000000-0000-0000-0000-000000000000", "req <uuid>"},
		// Timestamps: ISO 8601 in its forms, Unix seconds and milliseconds.
		mask{"at 2026-11-30T05:58:40Z", "at <time>"},
		mask{"at 2026-12-01 17:03:09.125+01:00", "at <time>"},
		mask{"at 2026-12-01T17:03:09.123456-0800", "at <time>"},
		mask{"at 1764482320", "at <n>"},
		mask{"at 1764482320125", "at <n>"},
		// The forwarder's status is kept, and only a status.
		mask{"downstream answered 503", "downstream answered 503"},
		mask{"downstream answered 404: not found", "downstream answered 404: not found"},
		mask{"bank answered 42", "bank answered <n>"},
		mask{"bank answered 12345678", "bank answered <n>"},
		// Ids and words with underscores, as before.
		mask{"timeout for evt_1QbX7fLkdIwHu7ixXY0pQ3rS", "timeout for <id>"},
		mask{"read_timeout on payment_intent.succeeded", "read_timeout on payment_intent.succeeded"},
	)
	for _, c := range cases {
		var got string
		if err := bundle.pool.QueryRow(t.Context(), `SELECT webhook_error_group($1)`, c.in).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// An app's error carrying a reference of 6 to 9 digits is one failure: each
// of 50 runs of 20 such events shows as one group of 20.
func TestFailureGroups_ReferencesOfAnyLengthAreOneGroup(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	const runs, events = 50, 20
	for run := range runs {
		if _, err := bundle.pool.Exec(ctx, `DELETE FROM webhook_events`); err != nil {
			t.Fatal(err)
		}
		refs := make([]string, events)
		for i := range refs {
			// Every length from 6 to 9 in each run, so each run straddles
			// the old 8-character line.
			refs[i] = randomDigits(6 + i%4)
			queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{LastError: "timeout after 10s ref=" + refs[i]})
		}
		groups, total, err := s.FailureGroups(ctx, 10, "", "")
		if err != nil {
			t.Fatal(err)
		}
		want := "timeout after <n>s ref=<n>"
		if total != 1 || len(groups) != 1 || groups[0].ErrorGroup != want || groups[0].Total() != events {
			t.Fatalf("run %d, refs %v: got %d groups %+v, want one group %q of %d", run, refs, total, groups, want, events)
		}
	}
}

// randomDigits returns n random decimal digits, the first not 0.
func randomDigits(n int) string {
	b := make([]byte, n)
	b[0] = byte('1' + rand.IntN(9))
	for i := 1; i < n; i++ {
		b[i] = byte('0' + rand.IntN(10))
	}
	return string(b)
}

// Migration 00014 recomputes the stored groups: events queued under 00008's
// mask join the groups new events get, and its Down splits them again.
func TestMigration00014_RegroupsEventsMaskedTheOldWay(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	ctx := t.Context()
	// The helper's database is already migrated: start from an empty one.
	if _, err := bundle.pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(bundle.pool)
	t.Cleanup(func() { db.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	const before = 13 // every migration before 00014
	if _, err := provider.UpTo(ctx, before); err != nil {
		t.Fatal(err)
	}
	for i, ref := range []string{"1234567", "12345678", "123456789", "42", "7654321", "87654321"} {
		if _, err := bundle.pool.Exec(ctx, `
			INSERT INTO webhook_events (source, event_id, event_type, payload, last_error)
			VALUES ('stripe', $1, 'invoice.paid', '{}', $2)`,
			fmt.Sprintf("evt_old_%d", i), "timeout after 10s ref="+ref); err != nil {
			t.Fatal(err)
		}
	}
	// The stored groups, read in SQL: FailureGroups also groups by
	// destination, a column the schemas before 00034 do not have.
	groups := func() map[string]int64 {
		t.Helper()
		rows, err := bundle.pool.Query(ctx, `SELECT error_group, count(*) FROM webhook_events GROUP BY error_group`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		var group string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&group, &n}, func() error { m[group] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	split := map[string]int64{"timeout after <n>s ref=<n>": 3, "timeout after <n>s ref=<hex>": 3}
	if got := groups(); !maps.Equal(got, split) {
		t.Fatalf("before the migration: groups %v, want the old mask's %v", got, split)
	}

	if _, err := migrations.Up(ctx, bundle.pool); err != nil {
		t.Fatal(err)
	}
	one := map[string]int64{"timeout after <n>s ref=<n>": 6}
	if got := groups(); !maps.Equal(got, one) {
		t.Fatalf("after the migration: groups %v, want %v", got, one)
	}
	if got, total, err := queue.New(bundle.pool).FailureGroups(ctx, 10, "", ""); err != nil || total != 1 ||
		got[0].ErrorGroup != "timeout after <n>s ref=<n>" || got[0].Total() != 6 || got[0].Destination != queue.DefaultDestination {
		t.Fatalf("after the migration: FailureGroups %+v (%d in all, %v), want default's one group of 6", got, total, err)
	}
	// A row written after the upgrade joins the same group.
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{LastError: "timeout after 10s ref=1234567890"})
	if got := groups(); got["timeout after <n>s ref=<n>"] != 7 || len(got) != 1 {
		t.Fatalf("after a new event: groups %v, want one of 7", got)
	}

	if _, err := provider.DownTo(ctx, before); err != nil {
		t.Fatal(err)
	}
	split["timeout after <n>s ref=<hex>"]++
	if got := groups(); !maps.Equal(got, split) {
		t.Fatalf("after the Down: groups %v, want the old mask's %v", got, split)
	}
}

// One error at two destinations is two groups, each of whose filters
// selects its own destination's deliveries only.
func TestFailureGroups_OneErrorAtTwoDestinationsIsTwoGroups(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	for i, dest := range []string{"billing", "billing", "crm", "default"} {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_%d", i), Destination: dest,
			LastError: fmt.Sprintf("HTTP 503 after %d ms", 100+i)})
	}
	groups, total, err := s.FailureGroups(ctx, 10, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, g := range groups {
		got[g.Destination+": "+g.ErrorGroup] = g.Total()
	}
	want := map[string]int64{"billing: HTTP <n> after <n> ms": 2, "crm: HTTP <n> after <n> ms": 1, "default: HTTP <n> after <n> ms": 1}
	if total != 3 || !maps.Equal(got, want) {
		t.Fatalf("groups %v (%d in all), want %v", got, total, want)
	}
	if groups[0].Destination != "billing" {
		t.Errorf("the largest group is %s's, want billing's", groups[0].Destination)
	}
	for _, g := range groups {
		n, err := s.CountEvents(ctx, g.Filter(queue.StatusPending))
		if err != nil {
			t.Fatal(err)
		}
		if n != g.Total() {
			t.Errorf("%s's group's filter selects %d events, want %d", g.Destination, n, g.Total())
		}
	}
	every := queue.FailureGroup{ErrorGroup: groups[0].ErrorGroup}
	if n, err := s.CountEvents(ctx, every.Filter(queue.StatusPending)); err != nil || n != 4 {
		t.Errorf("the error's group of every destination selects %d events (%v), want 4", n, err)
	}
}
