package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Replicas: the beats that keep a replica's leases live
// (migrations/00024_replica_heartbeats.sql).
//
// A replica that holds leases beats every BeatInterval; its leases are live
// while it has beaten within ReplicaSilence, so a replica killed or cut
// off from the database lets its events go within seconds, whatever its
// leases' expiry. The holder's side of the bargain is worker.Heartbeat:
// when its beats stop succeeding it cancels its processors FenceAfter the
// last beat that did, on its own clock, before any lease of its could be
// taken over.

const (
	// BeatInterval is how often a replica beats.
	BeatInterval = time.Second
	// ReplicaSilence is how long a replica may go without a beat before
	// its leases may be taken over.
	ReplicaSilence = 5 * time.Second
	// FenceAfter is how long after sending the last beat that succeeded a
	// replica cancels its processors: a second before ReplicaSilence, for
	// the cancellation to reach them and the clocks' rates to differ.
	FenceAfter = ReplicaSilence - time.Second
	// leaseGrace is how long no lease is granted after the database lost
	// them (crash recovery empties the unlogged lease table, and a promoted
	// standby has none): longer than any holder from before can run a
	// processor, since each either beats and finds its replica gone, or
	// fences itself FenceAfter its last beat.
	leaseGrace = ReplicaSilence + LeaseMargin
)

// replicaID is a Store's replica.
type replicaID struct{ id [16]byte }

// arg is the id as a statement's argument: NULL for no replica.
func (r *replicaID) arg() *[16]byte {
	if r == nil {
		return nil
	}
	return &r.id
}

// WithReplica makes the Store's leases those of replica, which must beat
// (Store.Beat) for them to stay live: production's stores all have one.
// Without it, a lease is judged by its expiry alone.
func WithReplica(replica uuid.UUID) Option {
	return func(s *Store) {
		s.replica = &replicaID{id: replica}
	}
}

// Replica returns the Store's replica's id, or uuid.Nil.
func (s *Store) Replica() uuid.UUID {
	if id := s.replica.arg(); id != nil {
		return uuid.UUID(*id)
	}
	return uuid.Nil
}

// intervalSQL is d as a PostgreSQL interval literal.
func intervalSQL(d time.Duration) string {
	return fmt.Sprintf("interval '%d milliseconds'", d.Milliseconds())
}

// grantableSQL is true when a lease may be granted to the replica whose id
// (or NULL) the SQL expression replica gives: the lease table has been
// whole for leaseGrace (lease_epoch's row is there and old enough), and the
// replica has a beat recent enough that it fences itself before its new
// lease could be taken over.
func grantableSQL(replica string) string {
	return `EXISTS (SELECT 1 FROM lease_epoch WHERE one AND began_at <= now() - ` + intervalSQL(leaseGrace) + `)
		AND (` + replica + `::uuid IS NULL OR EXISTS (
			SELECT 1 FROM hookd_replicas rep
			WHERE rep.id = ` + replica + `::uuid AND rep.beat_at > now() - ` + intervalSQL(FenceAfter) + `))`
}

// Register adds the Store's replica to those that beat, or beats it again.
func (s *Store) Register(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `
		INSERT INTO hookd_replicas (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET beat_at = now()`, s.replica.arg()); err != nil {
		return fmt.Errorf("register replica: %w", err)
	}
	return nil
}

// Beat moves the Store's replica's beat to now, and reports false when its
// row was gone: the database lost it (crash recovery, a promoted standby)
// or another replica found it silent, and either way its leases may be
// another's now. In the same round trip it writes lease_epoch's row again
// when the database lost it, and lets go of the leases of replicas silent
// past ReplicaSilence: their claimed retries are due at once, and the runs
// they had started become suspects (reapSilentSQL).
func (s *Store) Beat(ctx context.Context) (registered bool, err error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO lease_epoch (began_at) VALUES (now()) ON CONFLICT (one) DO NOTHING`)
	b.Queue(beatSQL, s.replica.arg())
	b.Queue(reapSilentSQL, MaxAttempts, CrashedFormat, SuspectError)
	if s.pool == nil {
		return false, errors.New("queue: a beat needs a Store over a pool, not a transaction")
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return false, fmt.Errorf("beat: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return false, fmt.Errorf("beat: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return false, fmt.Errorf("let go of silent replicas: %w", err)
	}
	return tag.RowsAffected() == 1, br.Close()
}

// beatSQL moves the beat of replica $1 to now; it changes no row when the
// replica's row is gone.
const beatSQL = `UPDATE hookd_replicas SET beat_at = now() WHERE id = $1`

// reapSilentSQL forgets the replicas silent past ReplicaSilence and
// deletes their leases. The runs of those leases that had started were cut
// short by a dead process: each event becomes a suspect (suspects.go),
// charged nothing, unless its run was a suspect's run alone, which is
// charged one attempt (CrashedFormat, dead at MaxAttempts with $2 the
// format's text), in the attempt history under the run's path (a replay's,
// or a retry's) and on the queue row while the event waits there; a
// replay's member not on the queue is numbered by its crashes. The queue
// rows of all their leases but replays' are due at once (a replay's member
// runs in its replay, and keeps its retry schedule). Only one beat can
// forget a replica, so each run is recorded once. $1 is MaxAttempts.
var reapSilentSQL = `
	WITH gone AS (
		DELETE FROM hookd_replicas WHERE beat_at < now() - ` + intervalSQL(ReplicaSilence) + `
		RETURNING id
	), orphans AS (
		DELETE FROM webhook_leases l
		WHERE l.replica IN (SELECT id FROM gone)
		RETURNING l.event_id, l.path, l.started_at IS NOT NULL AS started, l.started_at IS NOT NULL AND l.alone AS crashed
	), suspected AS (
		INSERT INTO webhook_suspects AS s (event_id, path, interruptions, crashes)
		SELECT o.event_id, o.path, CASE WHEN o.crashed THEN 0 ELSE 1 END, CASE WHEN o.crashed THEN 1 ELSE 0 END
		FROM orphans o
		WHERE o.started AND NOT ` + notEventKey("o.event_id") + `
		ON CONFLICT (event_id) DO UPDATE
		SET interruptions = s.interruptions + excluded.interruptions, crashes = s.crashes + excluded.crashes,
		    path = excluded.path, cleared_at = NULL
		RETURNING s.event_id, s.crashes
	), due AS (
		UPDATE webhook_events e
		SET next_retry_at = CASE WHEN o.crashed AND e.attempts + 1 >= $1 THEN e.next_retry_at
		                         WHEN o.path = '` + string(PathReplay) + `' THEN e.next_retry_at ELSE now() END,
		    attempts = e.attempts + CASE WHEN o.crashed THEN 1 ELSE 0 END,
		    status = CASE WHEN o.crashed AND e.attempts + 1 >= $1 THEN 'dead' ELSE e.status END,
		    payload = ` + erasedPayloadSQL("e", "o.crashed AND e.attempts + 1 >= $1") + `,
		    last_error = CASE WHEN o.crashed THEN format($2, e.attempts + 1)
		                      WHEN o.started THEN $3 ELSE e.last_error END,
		    last_attempt_at = CASE WHEN o.crashed THEN now() ELSE e.last_attempt_at END,
		    claims = CASE WHEN o.crashed THEN 0 ELSE e.claims END
		FROM orphans o
		WHERE e.lease_key = o.event_id AND e.` + pending + `
		RETURNING e.source, e.event_id, e.attempts, o.crashed, o.path, e.destination
	)
	` + insertAttemptsSQL(`
	SELECT d.source, d.event_id, 0, 'failed', NULL::int, format($2, d.attempts),
	       CASE WHEN d.path = '`+string(PathReplay)+`' THEN d.path ELSE 'retry' END, d.attempts, NULL::text, d.destination
	FROM due d WHERE d.crashed
	UNION ALL
	SELECT '`+SourceStripe+`', s.event_id, 0, 'failed', NULL::int, format($2, s.crashes), o.path, s.crashes, NULL::text,
	       '`+DefaultDestination+`'
	FROM orphans o JOIN suspected s USING (event_id)
	WHERE o.crashed AND o.path = '`+string(PathReplay)+`'
	  AND NOT EXISTS (SELECT 1 FROM due d WHERE `+deliveryKeySQL("d")+` = o.event_id)`)

// Deregister removes the Store's replica at a clean stop, once none of its
// processors runs: a lease it still has (none, after a clean stop) is
// free at once.
func (s *Store) Deregister(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM hookd_replicas WHERE id = $1`, s.replica.arg()); err != nil {
		return fmt.Errorf("deregister replica: %w", err)
	}
	return nil
}
