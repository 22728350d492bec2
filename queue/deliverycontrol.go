package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeliveryControl is whether delivery to the app is held, as every replica
// reads it from the one row of delivery_control: paused by a person, or by
// the circuit breaker.
type DeliveryControl struct {
	// PausedAt, PausedBy and PausedReason are a person's pause; PausedAt
	// is nil while delivery is not paused.
	PausedAt     *time.Time
	PausedBy     string
	PausedReason string
	// BreakerFailures is how many app-down failures came in a row.
	BreakerFailures int
	// BreakerOpenedAt is when the breaker opened; nil while it is closed.
	// BreakerError is the failure that opened it, ProbeDueAt when the next
	// probe of the app is due.
	BreakerOpenedAt *time.Time
	BreakerError    string
	ProbeDueAt      *time.Time
	// ReadAt is the database's clock when the row was read.
	ReadAt time.Time
}

// Paused reports whether a person paused delivery.
func (c DeliveryControl) Paused() bool { return c.PausedAt != nil }

// BreakerOpen reports whether the circuit breaker holds delivery.
func (c DeliveryControl) BreakerOpen() bool { return c.BreakerOpenedAt != nil }

// Held reports whether deliveries go to the queue instead of the app.
func (c DeliveryControl) Held() bool { return c.Paused() || c.BreakerOpen() }

// ReadDeliveryControl reads the delivery_control row.
func (s *Store) ReadDeliveryControl(ctx context.Context) (DeliveryControl, error) {
	var c DeliveryControl
	var by, reason, breakerErr *string
	err := s.db.QueryRow(ctx, `
		SELECT paused_at, paused_by, paused_reason, breaker_failures, breaker_opened_at, breaker_error,
		       probe_due_at, now()
		FROM delivery_control WHERE id = true`).Scan(&c.PausedAt, &by, &reason, &c.BreakerFailures,
		&c.BreakerOpenedAt, &breakerErr, &c.ProbeDueAt, &c.ReadAt)
	if err != nil {
		return DeliveryControl{}, fmt.Errorf("read delivery control: %w", err)
	}
	c.PausedBy, c.PausedReason, c.BreakerError = deref(by), deref(reason), deref(breakerErr)
	return c, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ErrAlreadyPaused and ErrNotHeld are PauseDelivery's and ResumeDelivery's
// answers when there is nothing to change.
var (
	ErrAlreadyPaused = errors.New("delivery is paused already")
	ErrNotHeld       = errors.New("delivery is not paused, and the circuit breaker is closed")
)

// PauseDelivery pauses delivery in the name of by, for reason. Run it in
// the transaction that audits it.
func (s *Store) PauseDelivery(ctx context.Context, by, reason string) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE delivery_control SET paused_at = now(), paused_by = $1, paused_reason = $2
		WHERE id = true AND paused_at IS NULL`, by, reason)
	if err != nil {
		return fmt.Errorf("pause delivery: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrAlreadyPaused
	}
	return nil
}

// ResumeDelivery ends a person's pause and closes the circuit breaker: the
// person who resumes says the app is ready. Run it in the transaction that
// audits it.
func (s *Store) ResumeDelivery(ctx context.Context) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE delivery_control
		SET paused_at = NULL, paused_by = NULL, paused_reason = NULL,
		    breaker_failures = 0, breaker_opened_at = NULL, breaker_error = NULL,
		    probe_due_at = NULL, probe_wait_seconds = 0
		WHERE id = true AND (paused_at IS NOT NULL OR breaker_opened_at IS NOT NULL)`)
	if err != nil {
		return fmt.Errorf("resume delivery: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotHeld
	}
	return nil
}

// TakeProbe takes the turn to probe the app with one event while the
// circuit breaker is open and nobody paused delivery, when a probe is due:
// one replica wins each turn. The next probe is due after twice this
// one's wait, at most maxWait.
func (s *Store) TakeProbe(ctx context.Context, maxWait time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE delivery_control
		SET probe_wait_seconds = least(probe_wait_seconds * 2, $1),
		    probe_due_at = now() + make_interval(secs => least(probe_wait_seconds * 2, $1))
		WHERE id = true AND breaker_opened_at IS NOT NULL AND paused_at IS NULL AND probe_due_at <= now()`,
		maxWait.Seconds())
	if err != nil {
		return false, fmt.Errorf("take a probe: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// WithBreaker makes the Store count app-down failures (NewAttempt.AppDown)
// in a row on delivery_control as it writes outcomes, in the same short
// transaction: after failures of them the breaker opens, with its first
// probe due after probe. Any other failure sets the count back to 0; a
// success does too, and closes the breaker.
//
// watcher, when set, is this replica's copy of the row: it hears the row
// each time an outcome changed it, so that this replica holds delivery at
// once rather than at its next read, and it tells whether the row counts
// anything. An answer (a success, or a failure the app answered) while it
// does not costs no statement at all: nearly every outcome is a success
// with nothing to reset, and an app that answers 500 to every call has
// nothing to reset either. Without a watcher, every answer resets the row.
func WithBreaker(failures int, probe time.Duration, watcher BreakerWatcher) Option {
	return func(s *Store) {
		s.breaker.failures, s.breaker.probe, s.breaker.watcher = failures, probe, watcher
	}
}

// BreakerWatcher is a replica's copy of the breaker's part of
// delivery_control (worker.Control).
type BreakerWatcher interface {
	// Observe hears the breaker as an outcome of this replica left it.
	Observe(open bool, failures int)
	// Counting reports whether the row, as last read (at most a moment
	// ago), counts failures or has the breaker open. A success on one
	// replica within that moment after another's first app-down failures
	// leaves them counted: the count is of failures with no success seen
	// between them by the replica that had the success.
	Counting() bool
}

type breakerConfig struct {
	failures int
	probe    time.Duration
	watcher  BreakerWatcher
	// perDestination, when set, counts each destination's calls on its
	// own breaker (WithDestinationBreakers).
	perDestination *destinationBreakers
}

// breakerTally is what a group of outcomes tells the breaker, in their
// order: whether the app answered any of them (answered) or took any
// (succeeded), and the app-down failures since the last answered one.
type breakerTally struct {
	answered, succeeded bool
	down                int
	lastError           string
}

func (t *breakerTally) add(a *NewAttempt, processed bool) {
	switch {
	case processed:
		t.answered, t.succeeded, t.down = true, true, 0
	case a == nil:
	case a.AppDown:
		t.down++
		t.lastError = a.Error
	default:
		t.answered, t.down = true, 0
	}
}

// merge adds the outcomes o counted to t's, as if they came after them.
func (t *breakerTally) merge(o breakerTally) {
	t.answered, t.succeeded = t.answered || o.answered, t.succeeded || o.succeeded
	if o.answered {
		t.down = o.down
	} else {
		t.down += o.down
	}
	if o.down > 0 {
		t.lastError = o.lastError
	}
}

// queue adds the breaker's update to a short transaction, last, so that
// the transactions writing it wait for each other only at their end; it
// changes (and locks) the row only when there is something to change, so
// outcomes that succeed while nothing failed never touch it.
func (t *breakerTally) queue(b *pgx.Batch, cfg breakerConfig) bool {
	switch {
	case cfg.failures <= 0, !t.answered && t.down == 0:
		return false
	case t.answered && t.down == 0 && cfg.watcher != nil && !cfg.watcher.Counting():
		return false
	}
	b.Queue(breakerSQL, t.answered, t.down, t.succeeded, cfg.failures, t.lastError, cfg.probe.Seconds())
	return true
}

func (t *breakerTally) read(br pgx.BatchResults, cfg breakerConfig) error {
	type row struct {
		Open     bool
		Failures int
	}
	rows, err := collect(br, pgx.RowToStructByPos[row])
	if err != nil {
		return err
	}
	if len(rows) == 1 && cfg.watcher != nil {
		cfg.watcher.Observe(rows[0].Open, rows[0].Failures)
	}
	return nil
}

// breakerSQL counts the outcomes of one short transaction: $1 whether the
// app answered any, $2 the app-down failures since the last it answered,
// $3 whether any succeeded, $4 the failures that open the breaker, $5 the
// last app-down failure's error, $6 the seconds to the first probe. It
// returns whether the breaker is open and the count, when it changed the
// row.
//
// The count is an expression of the row itself, not of a read before the
// update: a transaction that waited for another's lock on the row counts
// on top of what that one committed.
const breakerSQL = `-- hookd.breaker
	UPDATE delivery_control c
	SET breaker_failures = CASE WHEN $1::bool THEN $2::int ELSE c.breaker_failures + $2::int END,
	    breaker_error = CASE WHEN $3::bool THEN NULL WHEN c.breaker_opened_at IS NOT NULL THEN c.breaker_error
	                         WHEN $2::int > 0 THEN $5::text ELSE c.breaker_error END,
	    breaker_opened_at = CASE WHEN $3::bool THEN NULL
	                             WHEN c.breaker_opened_at IS NULL AND ` + breakerOpens + ` THEN now()
	                             ELSE c.breaker_opened_at END,
	    probe_due_at = CASE WHEN $3::bool THEN NULL
	                        WHEN c.breaker_opened_at IS NULL AND ` + breakerOpens + `
	                        THEN now() + make_interval(secs => $6::float8)
	                        ELSE c.probe_due_at END,
	    probe_wait_seconds = CASE WHEN $3::bool THEN 0
	                              WHEN c.breaker_opened_at IS NULL AND ` + breakerOpens + ` THEN $6::float8
	                              ELSE c.probe_wait_seconds END
	WHERE c.id = true
	  AND ($2::int > 0 OR c.breaker_failures > 0 OR ($3::bool AND c.breaker_opened_at IS NOT NULL))
	RETURNING c.breaker_opened_at IS NOT NULL, c.breaker_failures`

// breakerOpens is true when the outcomes bring the count to the breaker's
// threshold and none of them succeeded.
const breakerOpens = `(NOT $3::bool AND (CASE WHEN $1::bool THEN $2::int ELSE c.breaker_failures + $2::int END) >= $4::int)`

// WithDestinationBreakers makes the Store count, for each destination of
// several (HOOKD_DESTINATIONS_FILE), the app-down failures of the calls to
// it on its own row of the destinations table: failures in a row open
// that destination's breaker, which holds its deliveries alone, and a
// probe of it closes it. watcher hears each destination's count.
func WithDestinationBreakers(failures int, probe time.Duration, watcher DestinationBreakerWatcher) Option {
	return func(s *Store) {
		s.breaker.perDestination = &destinationBreakers{failures: failures, probe: probe, watcher: watcher}
	}
}

// DestinationBreakerWatcher is told what each destination's breaker count
// became (worker.Control), and says whether a destination's count is
// anything but closed at zero, so that a run of successes writes nothing.
type DestinationBreakerWatcher interface {
	ObserveDestination(destination string, open bool, failures int)
	CountingDestination(destination string) bool
}

// destinationBreakers configures the destinations' breakers.
type destinationBreakers struct {
	failures int
	probe    time.Duration
	watcher  DestinationBreakerWatcher
}

// destinationTallies counts the outcomes of one transaction's calls by
// destination, each as breakerTally does for the one app.
type destinationTallies struct {
	byName map[string]*breakerTally
}

// add counts one call to destination: its attempt a (nil for none) and
// whether it succeeded.
func (t *destinationTallies) add(destination string, a *NewAttempt, succeeded bool) {
	if t.byName == nil {
		t.byName = map[string]*breakerTally{}
	}
	d := t.byName[destination]
	if d == nil {
		d = &breakerTally{}
		t.byName[destination] = d
	}
	d.add(a, succeeded)
}

// queue sends the statement that writes the counts, when some count
// changes a destination's breaker, and says whether it sent it.
func (t *destinationTallies) queue(b *pgx.Batch, cfg *destinationBreakers) bool {
	if cfg == nil || cfg.failures <= 0 || len(t.byName) == 0 {
		return false
	}
	var names, errs []string
	var answered, succeeded []bool
	var down []int
	for _, name := range slices.Sorted(maps.Keys(t.byName)) {
		d := t.byName[name]
		switch {
		case !d.answered && d.down == 0:
			continue
		case d.answered && d.down == 0 && cfg.watcher != nil && !cfg.watcher.CountingDestination(name):
			continue
		}
		names, errs = append(names, name), append(errs, d.lastError)
		answered, succeeded, down = append(answered, d.answered), append(succeeded, d.succeeded), append(down, d.down)
	}
	if len(names) == 0 {
		return false
	}
	b.Queue(destinationBreakersSQL, names, answered, down, succeeded, errs, cfg.failures, cfg.probe.Seconds())
	return true
}

// read tells the watcher what each destination's count became.
func (t *destinationTallies) read(br pgx.BatchResults, cfg *destinationBreakers) error {
	type row struct {
		Name     string
		Open     bool
		Failures int
	}
	rows, err := collect(br, pgx.RowToStructByPos[row])
	if err != nil {
		return err
	}
	if cfg.watcher != nil {
		for _, r := range rows {
			cfg.watcher.ObserveDestination(r.Name, r.Open, r.Failures)
		}
	}
	return nil
}

// destinationBreakersSQL is breakerSQL for the destinations $1, each with
// its own count ($2 answered, $3 app-down failures, $4 succeeded, $5 last
// error); $6 is the failures in a row that open a breaker and $7 the first
// probe's wait in seconds. The rows are written in name order, so two
// transactions never wait on each other's the other way round.
const destinationBreakersSQL = `-- hookd.destination_breakers
	WITH t AS (
		SELECT t.*, CASE WHEN t.answered THEN t.down ELSE d.breaker_failures + t.down END AS count
		FROM unnest($1::text[], $2::bool[], $3::int[], $4::bool[], $5::text[]) AS t(name, answered, down, succeeded, last_error)
		JOIN destinations d ON d.name = t.name
	)
	UPDATE destinations d
	SET breaker_failures = t.count,
	    breaker_error = CASE WHEN t.succeeded THEN NULL WHEN d.breaker_opened_at IS NOT NULL THEN d.breaker_error
	                         WHEN t.down > 0 THEN t.last_error ELSE d.breaker_error END,
	    breaker_opened_at = CASE WHEN t.succeeded THEN NULL
	                             WHEN d.breaker_opened_at IS NULL AND NOT t.succeeded AND t.count >= $6 THEN now()
	                             ELSE d.breaker_opened_at END,
	    probe_due_at = CASE WHEN t.succeeded THEN NULL
	                        WHEN d.breaker_opened_at IS NULL AND NOT t.succeeded AND t.count >= $6
	                        THEN now() + make_interval(secs => $7::float8)
	                        ELSE d.probe_due_at END,
	    probe_wait_seconds = CASE WHEN t.succeeded THEN 0
	                              WHEN d.breaker_opened_at IS NULL AND NOT t.succeeded AND t.count >= $6 THEN $7::float8
	                              ELSE d.probe_wait_seconds END
	FROM t
	WHERE d.name = t.name AND (t.down > 0 OR d.breaker_failures > 0 OR (t.succeeded AND d.breaker_opened_at IS NOT NULL))
	RETURNING d.name, d.breaker_opened_at IS NOT NULL, d.breaker_failures`

// TakeDestinationProbe is TakeProbe of destination's breaker: it reports
// whether this replica won the probe due now, and pushes the next one
// twice as far, up to maxWait.
func (s *Store) TakeDestinationProbe(ctx context.Context, destination string, maxWait time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE destinations
		SET probe_wait_seconds = least(probe_wait_seconds * 2, $2),
		    probe_due_at = now() + make_interval(secs => least(probe_wait_seconds * 2, $2))
		WHERE name = $1 AND breaker_opened_at IS NOT NULL AND paused_at IS NULL AND probe_due_at <= now()`,
		destination, maxWait.Seconds())
	if err != nil {
		return false, fmt.Errorf("take a probe of %s: %w", destination, err)
	}
	return tag.RowsAffected() == 1, nil
}
