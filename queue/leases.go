package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// Leases: one run of an event's processor at a time, with no transaction
// open while it runs.
//
// An event's lease is a row of webhook_leases keyed by its event id and
// shared by every path that runs a processor: a delivery, the retry loop,
// reconciliation. It is taken in a short transaction that first reads the
// event's marker and queue state (an event processed or queued takes no
// lease, and its redelivery writes nothing) and commits before the
// processor runs; the
// outcome (the marker, or the queue row and the attempt) and the lease's
// release commit together in a second one, and only while the lease still
// has the owner token it was taken with. So a lost session, a failover or a
// pooler in front of the database cannot let two processors run one event
// at once: nothing that ends with a session is what keeps them apart.
//
// A lease lasts longer than its holder's processor may run: the holder
// starts counting its deadline before it sends the statement that takes the
// lease, and the lease expires LeaseMargin after that deadline at the
// earliest, and while the holder's replica beats (replicas.go): a replica
// that stops beating lets its leases go ReplicaSilence later, and cancels
// its own processors before that. A lease no longer live is taken over; a
// holder whose lease was taken over writes nothing (ErrLeaseLost), so the
// new holder's outcome stands. A takeover of a run that had started counts
// that run as an interrupted attempt, so an event that kills hookd on every
// attempt ends dead.

// LeaseMargin is how long a lease outlasts its holder's processor
// deadline: the time it has to write its outcome before another path may
// take the event over. Past it the holder's outcome is refused rather than
// wrong, so the margin bounds how soon a lost holder is replaced, not
// whether two processors overlap.
const LeaseMargin = 5 * time.Second

var (
	// ErrEventLocked is returned by TryLease when another delivery,
	// retry or recovery of the same event holds its lease.
	ErrEventLocked = errors.New("event is leased by another delivery")
	// ErrNotGranted is returned when no lease may be granted to this
	// replica at the moment, whoever holds the event: its heartbeat has not
	// reached the database lately (it registers again within a second), or
	// the database lost its leases (crash recovery, a promoted standby)
	// within the grace after which it grants them again.
	ErrNotGranted = errors.New("no lease can be granted yet: this replica's heartbeat has not reached the database lately, " +
		"or the database lost its leases moments ago")

	// ErrLeaseLost is returned for an outcome whose lease had expired and
	// was taken over, or was released already: nothing of it was written.
	ErrLeaseLost = errors.New("the event's lease was taken over")
)

// Lease is a held lease on one event, or on a key no event id can have, as
// TryLease returns it.
type Lease struct {
	store   *Store
	EventID string
	Owner   uuid.UUID
	// Deadline is when the holder's processor must have ended, on this
	// machine's clock; the lease expires LeaseMargin after it at the
	// earliest.
	Deadline time.Time
}

// Release gives the lease back without an outcome, so the event may be
// taken at once. It returns ErrLeaseLost when the lease was no longer
// this holder's.
func (l *Lease) Release(ctx context.Context) error {
	n, err := l.store.releaseLeases(ctx, []string{l.EventID}, []uuid.UUID{l.Owner})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

func (s *Store) releaseLeases(ctx context.Context, eventIDs []string, owners []uuid.UUID) (int64, error) {
	return store.Delete(ctx, s.db, "release leases", releaseLeasesSQL("$1", "$2"), eventIDs, uuidArray(owners))
}

// TryLease takes the lease of key (an event id, or a key no event id can
// have, for work that must run once at a time across replicas) for path
// and a run of processFor starting now, without waiting, or returns
// ErrEventLocked when another holder has a live one. Under WithReplica the
// replica's beats keep it live too. Renew it while the run goes on, and
// give it back with Release or ReleaseWith.
func (s *Store) TryLease(ctx context.Context, key string, path AttemptPath, processFor time.Duration) (*Lease, error) {
	owner, deadline := uuid.New(), time.Now().Add(processFor)
	var taken []string
	err := s.shortTx(ctx, func(b *pgx.Batch) {
		b.Queue(takeLeasesSQL, []string{key}, []AttemptPath{path}, [16]byte(owner), leaseSeconds(processFor), s.replica.arg())
	}, func(br pgx.BatchResults) (err error) {
		taken, err = collect(br, func(row pgx.CollectableRow) (string, error) {
			var id string
			return id, row.Scan(&id, nil)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", key, err)
	}
	if len(taken) == 0 {
		return nil, ErrEventLocked
	}
	return &Lease{store: s, EventID: key, Owner: owner, Deadline: deadline}, nil
}

// Renew extends the lease for a run of processFor from now, or returns
// ErrLeaseLost when it was no longer this holder's.
func (l *Lease) Renew(ctx context.Context, processFor time.Duration) error {
	tag, err := l.store.db.Exec(ctx, `
		UPDATE webhook_leases SET expires_at = now() + make_interval(secs => $3)
		WHERE event_id = $1 AND owner = $2`, l.EventID, l.Owner, leaseSeconds(processFor))
	if err != nil {
		return fmt.Errorf("renew lease of %s: %w", l.EventID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	l.Deadline = time.Now().Add(processFor)
	return nil
}

// ReleaseWith runs write and gives the lease back in one transaction, so
// that whoever takes the lease next sees what write wrote. A lease that
// was no longer this holder's is left to its holder; write's rows commit
// all the same.
func (l *Lease) ReleaseWith(ctx context.Context, write func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, l.store.db, func(tx pgx.Tx) error {
		if err := write(tx); err != nil {
			return err
		}
		in := l.store.on(tx)
		_, err := in.releaseLeases(ctx, []string{l.EventID}, []uuid.UUID{l.Owner})
		return err
	})
}

// releaseLeasesSQL deletes the leases of the event ids in the text[]
// parameter ids still held by the owners in the uuid[] parameter owners, at
// the same places, and returns their event_id, owner, whether their run
// had started and whether it was a suspect's run alone. It finds them by
// the ids alone, through the primary key: a join with the parameters would
// be planned, once for all executions, as a scan of the whole table, which
// holds every lease deleted since the last vacuum.
func releaseLeasesSQL(ids, owners string) string {
	return `
		DELETE FROM webhook_leases l
		WHERE l.event_id = ANY (` + ids + `::text[])
		  AND (l.event_id, l.owner) IN (SELECT * FROM unnest(` + ids + `::text[], ` + owners + `::uuid[]))
		RETURNING l.event_id, l.owner, l.started_at IS NOT NULL AS started, l.alone`
}

// leaseSeconds is how long, in seconds, a lease for a processor that may
// run for d lasts once taken.
func leaseSeconds(d time.Duration) float64 { return (d + LeaseMargin).Seconds() }

// liveLeaseSQL is true when the lease l (a webhook_leases row) keeps every
// other path off its event: it has not expired, and its replica, if it has
// one, has beaten within ReplicaSilence.
func liveLeaseSQL(l string) string {
	return `(` + l + `.expires_at > now() AND (` + l + `.replica IS NULL OR EXISTS (
		SELECT 1 FROM hookd_replicas rep
		WHERE rep.id = ` + l + `.replica AND rep.beat_at > now() - ` + intervalSQL(ReplicaSilence) + `)))`
}

// heldLeasesSQL selects, of the leases of the event ids the SELECT events
// gives, those no one is writing at this moment, each with whether its run
// started and whether it is live (liveLeaseSQL), and locks them. A lease
// being given back with its outcome is skipped, not waited for, so a claim
// never waits on a settle (which may be waiting on a row the claim holds).
func heldLeasesSQL(events string) string {
	return `
		SELECT l.event_id, l.started_at IS NOT NULL AS started, ` + liveLeaseSQL("l") + ` AS live
		FROM webhook_leases l
		WHERE l.event_id IN (` + events + `)
		FOR UPDATE SKIP LOCKED`
}

// interruptedSQL is what a takeover of the lease l records of its previous
// holder: the path of a run that started under it and never reported, or
// what l itself had recorded when its holder never started.
func interruptedSQL(l string) string {
	return `CASE WHEN ` + l + `.started_at IS NOT NULL THEN ` + l + `.path ELSE ` + l + `.interrupted END`
}

// insertLeasesSQL is the one statement that takes leases: it inserts the
// rows the SELECT rows gives (event_id, owner, path, expires_at, replica,
// started_at, in that order, each event once, ordered by event_id so that
// two statements taking overlapping sets wait for each other in one order
// and never deadlock), takes over the lease of an event whose lease is no
// longer live (liveLeaseSQL), recording in interrupted a run that started
// under it and never reported, and returns the ids it took with what each
// takeover recorded. It never waits for a live lease: a wait lasts only as
// long as another short transaction. rows must filter on grantableSQL.
//
// Each row returned also says whether the takeover cut short a started run
// (cut_short) and whether that run was a suspect's run alone (crashed):
// suspectedSQL makes the former suspects, and the claim of a suspect
// charges the latter.
func insertLeasesSQL(rows string) string { return insertLeasesWithSQL(false, rows) }

// insertLeasesWithSQL is insertLeasesSQL; with alone, rows gives a
// seventh column, whether the run is a suspect's run alone.
func insertLeasesWithSQL(alone bool, rows string) string {
	cols := "event_id, owner, path, expires_at, replica, started_at"
	if alone {
		cols += ", alone"
	}
	return `
	INSERT INTO webhook_leases AS l (` + cols + `)
	` + rows + `
	ON CONFLICT (event_id) DO UPDATE
	SET owner = excluded.owner, path = excluded.path, taken_at = excluded.taken_at, expires_at = excluded.expires_at,
	    replica = excluded.replica, started_at = excluded.started_at, interrupted = ` + interruptedSQL("l") + `,
	    cut_short = l.started_at IS NOT NULL, crashed = l.started_at IS NOT NULL AND l.alone, alone = excluded.alone
	WHERE NOT ` + liveLeaseSQL("l") + `
	RETURNING l.event_id, l.interrupted, l.cut_short, l.crashed`
}

// takeLeasesSQL takes the leases of the event ids $1, each for the path of
// $2 at the same place, for owner $3 and $4 seconds, for replica $5 (NULL
// for none), their runs starting now, and returns the ids it took (and
// what each takeover recorded). An id given twice would be taken twice by
// one command, which PostgreSQL refuses: callers pass each once.
var takeLeasesSQL = `-- hookd.take_leases
	WITH taken AS (` + insertLeasesSQL(`
	SELECT d.id, $3, d.path, now() + make_interval(secs => $4), $5, now()
	FROM unnest($1::text[], $2::text[]) AS d(id, path)
	WHERE `+grantableSQL("$5")+`
	ORDER BY d.id`) + `
	), suspected AS (` + suspectedSQL("taken") + `
	)
	SELECT event_id, interrupted FROM taken`

// InFlight is a live lease on an event: a processor is running it now.
type InFlight struct {
	Path      AttemptPath `db:"path"`
	TakenAt   time.Time   `db:"taken_at"`
	ExpiresAt time.Time   `db:"expires_at"`
	// Started: the run under the lease started, and its attempt counts;
	// a retry's queue row counts it with its outcome, so the attempt
	// running is the one after the row's.
	Started bool `db:"started"`
}

// EventInFlight returns the live lease of eventID, or nil when no
// processor is running the event.
func (s *Store) EventInFlight(ctx context.Context, eventID string) (*InFlight, error) {
	var f InFlight
	err := s.db.QueryRow(ctx, `
		SELECT path, taken_at, expires_at, started_at IS NOT NULL FROM webhook_leases
		WHERE event_id = $1 AND `+liveLeaseSQL("webhook_leases"), eventID).Scan(&f.Path, &f.TakenAt, &f.ExpiresAt, &f.Started)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease of %s: %w", eventID, err)
	}
	return &f, nil
}

// EventsInFlight returns the live leases among eventIDs, by event id: the
// events of a dashboard page that a processor is running now. Its WHERE is
// on the primary key, so a page costs a lookup per event however many
// leases a flood leaves in the table.
func (s *Store) EventsInFlight(ctx context.Context, eventIDs []string) (map[string]InFlight, error) {
	inFlight := make(map[string]InFlight)
	if len(eventIDs) == 0 {
		return inFlight, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT event_id, path, taken_at, expires_at, started_at IS NOT NULL AS started FROM webhook_leases
		WHERE event_id = ANY($1) AND `+liveLeaseSQL("webhook_leases"), eventIDs)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	type lease struct {
		EventID string `db:"event_id"`
		InFlight
	}
	leases, err := pgx.CollectRows(rows, pgx.RowToStructByName[lease])
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	for _, l := range leases {
		inFlight[l.EventID] = l.InFlight
	}
	return inFlight, nil
}

// PruneLeases deletes leases that expired more than olderThan ago: those
// whose holder died before it could give them back and that no one has
// taken over since. A live lease, or one just expired, is never touched.
func (s *Store) PruneLeases(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.Delete(ctx, s.db, "prune leases",
		`DELETE FROM webhook_leases WHERE expires_at < now() - make_interval(secs => $1)`, olderThan.Seconds())
}

// plansSQL makes the statements of a short transaction run on plans made
// once per connection, for that transaction only. Each takes its ids as an
// array, and unnest's row estimate differs between a plan for the array at
// hand and one for any array, so PostgreSQL would otherwise plan them anew
// every time: that planning was a third of its CPU per delivery under load.
// With sequential scans off, the plan made once finds events by their
// unique indexes, as it must however few rows the tables held when it was
// made: a plan for an empty table would scan it, and stay until the table
// is next analyzed. JIT is off: a sequential scan left in a plan (of a
// one-row table, say) carries the disabled-scan cost, which passes JIT's
// threshold and compiled a statement of microseconds for a second.
const plansSQL = `
	SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	       set_config('enable_seqscan', 'off', true),
	       set_config('jit', 'off', true)`

// shortTx runs the statements queue adds in one transaction sent as one
// pipeline, so it costs one round trip and is never open while hookd waits
// on anything but the database; read reads their results in order.
//
// The pipeline has no BEGIN and no COMMIT: PostgreSQL runs the statements
// up to the pipeline's one Sync as one implicit transaction, committed at
// the Sync, and a statement's error rolls back the ones before it and
// skips the ones after. That is two statements fewer per transaction, and
// the connection is never left inside one.
//
// A transaction that writes only leases, an unlogged table, commits without
// waiting for a flush to disk: PostgreSQL flushes only commits that wrote
// WAL, and one that only read writes no commit record at all.
func (s *Store) shortTx(ctx context.Context, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	if s.pool == nil {
		return errors.New("queue: a short transaction needs a Store over a pool, not a transaction")
	}
	b := &pgx.Batch{}
	b.Queue(plansSQL)
	queue(b)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// collect reads the rows of a batch's next query.
func collect[T any](br pgx.BatchResults, fn pgx.RowToFunc[T]) ([]T, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, fn)
}
