package queue

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/store"
)

// AttemptPath says who ran a processing attempt.
type AttemptPath string

const (
	PathInline AttemptPath = "inline" // the receiver, while Stripe waited
	PathRetry  AttemptPath = "retry"  // the retry loop, on its schedule
	PathManual AttemptPath = "manual" // the retry loop, after a person asked
	// PathReconcile is an event Stripe's delivery never brought, recovered
	// from Stripe's Events API by reconciliation.
	PathReconcile AttemptPath = "reconcile"
	// PathReplay is a replay's delivery of an event (see StartReplay).
	PathReplay AttemptPath = "replay"
)

// AttemptPaths are the paths, for whoever lists them (the metrics' help).
var AttemptPaths = []AttemptPath{PathInline, PathRetry, PathManual, PathReconcile, PathReplay}

// AttemptOutcome is how a processing attempt ended: the outcome column of
// its history, and the result label of the metrics that count attempts.
type AttemptOutcome string

const (
	AttemptSucceeded AttemptOutcome = "succeeded"
	AttemptFailed    AttemptOutcome = "failed"
)

// What earlier versions of hookd recorded for a run cut short, which they
// charged to every event in flight: a delivery's run the receiver found
// (legacyInterruptedRun), a retry the claim found (legacyInterruptedFormat,
// with the attempt's number). The history of events from then keeps them.
const (
	legacyInterruptedRun = "the run of this event was interrupted: hookd stopped or lost its database before it " +
		"could record the outcome, so it counts as a failed attempt and the event is queued for retry"
	legacyInterruptedFormat = "attempt %s was interrupted: hookd stopped or lost its database " +
		"before it could record the outcome, so the attempt counts as failed"
)

// Interrupted reports whether a is an attempt that never came back: a
// suspect's run alone that crashed hookd (CrashedFormat), or a run an
// earlier version charged when it was cut short.
func (a Attempt) Interrupted() bool {
	if a.Outcome != AttemptFailed || a.Error == nil {
		return false
	}
	n := strconv.Itoa(a.Number)
	return *a.Error == strings.Replace(CrashedFormat, "%s", n, 1) || *a.Error == legacyInterruptedRun ||
		*a.Error == strings.Replace(legacyInterruptedFormat, "%s", n, 1)
}

// Attempt is one processing attempt of an event.
type Attempt struct {
	Source      string         `db:"source"`
	EventID     string         `db:"event_id"`
	AttemptedAt time.Time      `db:"attempted_at"`
	Duration    time.Duration  `db:"-"`
	DurationMS  float64        `db:"duration_ms"`
	Succeeded   bool           `db:"-"`
	Outcome     AttemptOutcome `db:"outcome"`
	HTTPStatus  *int           `db:"http_status"`
	Error       *string        `db:"error"`
	Path        AttemptPath    `db:"path"`
	// Number is the attempt's number: 0 inline, then the retry number. A
	// replay's attempt carries the event's attempts before it.
	Number int `db:"attempt"`
	// ReplayID and ReplayName are the replay that made an attempt of path
	// replay; nil for other paths, and for a replay pruned since.
	ReplayID   *int64  `db:"replay_id"`
	ReplayName *string `db:"replay_name"`
	// TraceID is the id of the trace the attempt ran in, when tracing was
	// on and the attempt was sampled; nil otherwise.
	TraceID *string `db:"trace_id"`
	// Destination is the destination the call went to.
	Destination string `db:"destination"`
}

// NewAttempt describes an attempt for the history, as SettleDeliveries and
// SettleAndStart record it with its outcome.
type NewAttempt struct {
	Source  string
	EventID string
	// Destination is the destination the call went to; "" is "default".
	Destination string
	Duration    time.Duration
	Succeeded   bool
	HTTPStatus  int // 0: none (the processor made no HTTP call or got no answer)
	Error       string
	Path        AttemptPath
	Number      int
	// AppDown: the failure says the app is down (no connection, a
	// timeout, 502, 503 or 504), not that it refused the event; the
	// circuit breaker counts these in a row (see WithBreaker).
	AppDown bool
	// TraceID is the attempt's trace id (32 hex digits) when it was
	// traced and sampled; "" otherwise.
	TraceID string
}

// Attempts returns the event's attempts, oldest first, each of path
// replay with its replay. An attempt row does not name its replay, but
// settleReplayedSQL writes the attempt and the member's state in one
// statement, so the member whose finished_at is the attempt's attempted_at
// (both that statement's now()) is the one the attempt delivered.
func (s *Store) Attempts(ctx context.Context, source, eventID string) ([]Attempt, error) {
	attempts, err := store.QueryAll[Attempt](ctx, s.db, `
		SELECT a.source, a.event_id, a.attempted_at, a.duration_ms, a.outcome, a.http_status, a.error, a.path, a.attempt,
		       r.id AS replay_id, r.name AS replay_name, a.trace_id, a.destination
		FROM webhook_attempts a
		LEFT JOIN LATERAL (
			SELECT p.id, p.name FROM replay_events m JOIN replays p ON p.id = m.replay_id
			WHERE a.path = '`+string(PathReplay)+`' AND m.event_id = a.event_id AND m.finished_at = a.attempted_at
			ORDER BY p.id DESC LIMIT 1
		) r ON true
		WHERE a.source = $1 AND a.event_id = $2
		ORDER BY a.attempted_at, a.id`, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("read attempts of %s: %w", eventID, err)
	}
	for i := range attempts {
		a := &attempts[i]
		a.Duration = time.Duration(a.DurationMS * float64(time.Millisecond))
		a.Succeeded = a.Outcome == AttemptSucceeded
	}
	return attempts, nil
}

// insertAttemptsSQL is the one statement that appends to the attempt
// history: the rows the SELECT rows gives (source, event_id, duration_ms,
// outcome, http_status, error, path, attempt, trace_id, destination, in that
// order).
func insertAttemptsSQL(rows string) string {
	return `
		INSERT INTO webhook_attempts (source, event_id, duration_ms, outcome, http_status, error, path, attempt, trace_id,
		                              destination)
		` + rows
}

// attemptArgs is how many parameters givenAttemptsSQL takes.
const attemptArgs = 12

// givenAttemptsSQL is insertAttemptsSQL of the attempts given column by
// column, as attemptColumns.args orders them, in the parameters from $first
// on. With released, the name of a set of (event_id, owner) rows, only the
// attempts whose lease is in it are recorded: an attempt whose outcome was
// refused leaves no history. An attempt finds its lease by its key: the
// delivery's (hookd_delivery_key) for a retry, the event's for a fan-out
// that held one lease for all its calls.
func givenAttemptsSQL(first int, released string) string {
	p := make([]string, attemptArgs)
	for i := range p {
		p[i] = "$" + strconv.Itoa(first+i)
	}
	rows := `SELECT a.source, a.event_id, a.duration_ms, a.outcome, NULLIF(a.http_status, 0), NULLIF(a.error, ''), a.path, a.attempt,
		       NULLIF(a.trace_id, ''), a.destination
		FROM unnest(` + p[0] + `::text[], ` + p[1] + `::text[], ` + p[2] + `::uuid[], ` + p[3] + `::float8[], ` +
		p[4] + `::text[], ` + p[5] + `::int[], ` + p[6] + `::text[], ` + p[7] + `::text[], ` + p[8] + `::int[], ` +
		p[9] + `::text[], ` + p[10] + `::text[], ` + p[11] + `::text[])
		     AS a(source, event_id, owner, duration_ms, outcome, http_status, error, path, attempt, trace_id, destination, key)`
	if released != "" {
		rows += `
		JOIN ` + released + ` r ON r.event_id = a.key AND r.owner = a.owner`
	}
	return insertAttemptsSQL(rows)
}

// attemptColumns holds attempts column by column, for givenAttemptsSQL,
// each with the owner of the lease it ran under.
type attemptColumns struct {
	source, eventID, outcome, errors, path []string
	traceID, destination, key              []string
	owner                                  []uuid.UUID
	durationMS                             []float64
	httpStatus, number                     []int
}

func (c *attemptColumns) add(a NewAttempt, owner uuid.UUID) { c.addKeyed(a, owner, a.EventID) }

// addKeyed adds a, whose lease has the key key (givenAttemptsSQL).
func (c *attemptColumns) addKeyed(a NewAttempt, owner uuid.UUID, key string) {
	outcome := AttemptFailed
	if a.Succeeded {
		outcome = AttemptSucceeded
	}
	c.source = append(c.source, a.Source)
	c.eventID = append(c.eventID, a.EventID)
	c.owner = append(c.owner, owner)
	c.durationMS = append(c.durationMS, float64(a.Duration)/float64(time.Millisecond))
	c.outcome = append(c.outcome, string(outcome))
	c.httpStatus = append(c.httpStatus, a.HTTPStatus)
	c.errors = append(c.errors, a.Error)
	c.path = append(c.path, string(a.Path))
	c.number = append(c.number, a.Number)
	c.traceID = append(c.traceID, a.TraceID)
	c.destination = append(c.destination, cmp.Or(a.Destination, DefaultDestination))
	c.key = append(c.key, key)
}

// args returns the columns in givenAttemptsSQL's order, with empty arrays
// rather than NULLs.
func (c *attemptColumns) args() []any {
	return []any{
		nonNil(c.source), nonNil(c.eventID), uuidArray(c.owner), nonNil(c.durationMS), nonNil(c.outcome),
		nonNil(c.httpStatus), nonNil(c.errors), nonNil(c.path), nonNil(c.number), nonNil(c.traceID),
		nonNil(c.destination), nonNil(c.key),
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// PruneAttempts deletes the attempt history older than olderThan of events
// that are no longer on the queue, i.e. resolved ones, and returns how many
// attempts it deleted. The history of an event still queued, dead ones
// included, is kept whatever its age: a person may still need it. It deletes
// in batches, as PruneProcessed does.
func (s *Store) PruneAttempts(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.DeleteInBatches(ctx, s.db, "attempts", `
		DELETE FROM webhook_attempts
		WHERE id = ANY (ARRAY(
			SELECT a.id FROM webhook_attempts a
			WHERE a.attempted_at < now() - make_interval(secs => $1)
			  AND NOT EXISTS (SELECT 1 FROM webhook_events e
			                  WHERE e.source = a.source AND e.event_id = a.event_id)
			LIMIT $2))`,
		olderThan.Seconds())
}
