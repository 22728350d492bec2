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

// Suspects: an interrupted attempt is charged only to the event that
// caused it.
//
// When a process dies, every run it had in flight is cut short, and
// nothing tells the event that killed it from the ones beside it. So a run
// cut short by a dead process (its lease taken over, or reaped with its
// silent replica) is recorded as interrupted and charged nothing: its event
// becomes a suspect (webhook_suspects). A suspect is claimed by no batch;
// it runs again alone (ClaimSuspect), on the one replica that holds the
// suspect slot (TakeSuspectSlot), with nothing else in flight there. A
// suspect whose run alone completes is cleared (a failure is charged as
// any other); one whose process dies while it runs alone is charged one
// attempt (CrashedFormat) and stays a suspect, so the fifth such crash
// makes it dead, and only it.

// SuspectSlotKey is the lease key of the suspect slot: the replica that
// holds it runs suspects, one at a time, and no other does. No event id
// has it.
const SuspectSlotKey = "hookd:suspects"

// SuspectError is the last_error of an event whose run a dead process cut
// short beside others: it is charged nothing and becomes a suspect.
const SuspectError = "a run of this event was cut short: hookd stopped (killed, or it lost its database) while it ran " +
	"with other events in flight; not charged: the event runs again alone, so that a crash is charged only to the event " +
	"that caused it"

// CrashedFormat is the last_error, for PostgreSQL's format() with the
// attempt's number, of a suspect whose process died while it ran alone:
// nothing else was running, so it crashed hookd, and the attempt counts.
const CrashedFormat = "attempt %s crashed hookd: the event ran alone after an earlier crash, and hookd stopped before " +
	"it could record the outcome, so the attempt counts as failed"

// notEventKey is true for the lease key SQL expression k of work that is
// not an event's (the suspect slot, reconciliation's run): its lease cut
// short makes no suspect.
func notEventKey(k string) string { return k + ` LIKE 'hookd:%'` }

// suspectedSQL makes suspects of the events of the set taken (rows of
// insertLeasesSQL) whose takeover cut short a run that was not alone, and
// counts the interruption, uncharged. A crashed run alone is the claim of
// the suspect's to charge (ClaimSuspect).
func suspectedSQL(taken string) string {
	return `
		INSERT INTO webhook_suspects AS s (event_id, path, interruptions)
		SELECT t.event_id, t.interrupted, 1 FROM ` + taken + ` t
		WHERE t.cut_short AND NOT t.crashed AND NOT ` + notEventKey("t.event_id") + `
		ON CONFLICT (event_id) DO UPDATE
		SET interruptions = s.interruptions + 1, path = excluded.path, cleared_at = NULL`
}

// notSuspectSQL is true when the event whose id the SQL expression id
// gives is not a suspect still to run alone.
//
// It is a NOT EXISTS, which PostgreSQL plans as an anti-join and estimates
// from webhook_suspects' statistics: while no suspect is open, every due
// event passes, the open suspects are read once per statement (an empty
// scan of webhook_suspects_open_idx), and the rows after it are planned for
// the batch they are. A scalar subquery tested for NULL instead would be
// run once per candidate and estimated at PostgreSQL's default 0.5% for a
// NULL test: a claim planned for a handful of rows sorted the whole
// backlog, or joined its batch with itself row by row.
func notSuspectSQL(id string) string {
	return `NOT EXISTS (SELECT 1 FROM webhook_suspects s WHERE s.event_id = ` + id + ` AND s.cleared_at IS NULL)`
}

// SuspectSlot is the suspect slot, held by this replica.
type SuspectSlot struct{ lease *Lease }

// TakeSuspectSlot takes the suspect slot for holdFor, or returns
// ErrEventLocked when another replica holds it. Its lease is kept live by
// the replica's beats, so a replica that dies holding it lets it go within
// ReplicaSilence; its run is never marked started, so losing it makes no
// suspect.
func (s *Store) TakeSuspectSlot(ctx context.Context, holdFor time.Duration) (*SuspectSlot, error) {
	owner := uuid.New()
	rows, err := s.db.Query(ctx, insertLeasesSQL(`
		SELECT $1::text, $2::uuid, 'retry', now() + make_interval(secs => $3), $4::uuid, NULL::timestamptz
		WHERE `+grantableSQL("$4")), SuspectSlotKey, [16]byte(owner), leaseSeconds(holdFor), s.replica.arg())
	if err != nil {
		return nil, fmt.Errorf("take the suspect slot: %w", err)
	}
	taken, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var id string
		return id, row.Scan(&id, nil, nil, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("take the suspect slot: %w", err)
	}
	if len(taken) == 0 {
		return nil, ErrEventLocked
	}
	return &SuspectSlot{lease: &Lease{store: s, EventID: SuspectSlotKey, Owner: owner, Deadline: time.Now().Add(holdFor)}}, nil
}

// Renew keeps the slot for holdFor from now, or returns ErrLeaseLost.
func (sl *SuspectSlot) Renew(ctx context.Context, holdFor time.Duration) error {
	return sl.lease.Renew(ctx, holdFor)
}

// Release hands the slot on: any replica may take it at once.
func (sl *SuspectSlot) Release(ctx context.Context) error {
	_, err := sl.lease.store.releaseLeases(ctx, []string{SuspectSlotKey}, []uuid.UUID{sl.lease.Owner})
	return err
}

// SuspectsWaiting reports whether some suspect could run now: pending, due
// and not leased by a live holder, or, with replays, a pending member of a
// running replay whose lease is free (ClaimReplaySuspect). The suspect
// runner asks before it takes the slot, so replicas with nothing to run
// alone never hold it.
func (s *Store) SuspectsWaiting(ctx context.Context, replays bool) (bool, error) {
	return s.SuspectsWaitingOf(ctx, nil, replays)
}

// SuspectsWaitingOf is SuspectsWaiting of the deliveries to destinations
// (nil: DefaultDestination's): a delivery to a destination no longer
// configured waits, and never runs alone.
func (s *Store) SuspectsWaitingOf(ctx context.Context, destinations []string, replays bool) (bool, error) {
	var waiting bool
	err := s.db.QueryRow(ctx, `
		SELECT EXISTS (
			SELECT 1 FROM webhook_suspects s
			WHERE s.cleared_at IS NULL
			  AND NOT EXISTS (SELECT 1 FROM webhook_leases l WHERE l.event_id = s.event_id AND `+liveLeaseSQL("l")+`)
			  AND CASE WHEN `+replaySuspectSQL("s")+` THEN $1
			           ELSE EXISTS (SELECT 1 FROM webhook_events e
			                        WHERE e.lease_key = s.event_id AND e.`+pending+` AND e.next_retry_at <= now()
			                          AND e.destination = ANY ($2)) END)`,
		replays, orDefault(destinations)).Scan(&waiting)
	if err != nil {
		return false, fmt.Errorf("read suspects: %w", err)
	}
	return waiting, nil
}

// ClaimSuspect claims the oldest suspect that can run now (pending, due,
// its lease free) for a run alone of processFor, as ClaimAttempts claims
// a batch: the lease taken not yet started (SettleAndStart starts it) and
// marked alone. The claim that takes over the lease of a run alone that
// started and never reported charges that attempt (CrashedFormat): where
// it was the fifth, the event is made dead instead (Claimed.Dead). It
// returns ok false when no suspect can run now.
func (s *Store) ClaimSuspect(ctx context.Context, processFor time.Duration) (c Claimed, deadline time.Time, ok bool, err error) {
	return s.ClaimSuspectOf(ctx, nil, processFor)
}

// ClaimSuspectOf is ClaimSuspect of the deliveries to destinations (nil:
// DefaultDestination's).
func (s *Store) ClaimSuspectOf(ctx context.Context, destinations []string, processFor time.Duration) (c Claimed,
	deadline time.Time, ok bool, err error) {
	owner := uuid.New()
	deadline = time.Now().Add(processFor)
	c, err = scanClaimed(s.db.QueryRow(ctx, claimSuspectSQL, [16]byte(owner), leaseSeconds(processFor), MaxAttempts, CrashedFormat,
		s.replica.arg(), orDefault(destinations)), owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return Claimed{}, deadline, false, nil
	}
	if err != nil {
		return Claimed{}, deadline, false, fmt.Errorf("claim a suspect: %w", err)
	}
	return c, deadline, true, nil
}

// claimSuspectSQL claims the oldest suspect that can run now for owner $1
// of replica $5, with a lease of $2 seconds marked alone; $3 is
// MaxAttempts and $4 CrashedFormat. A suspect whose run alone crashed is
// charged that attempt here; at MaxAttempts it is made dead, its lease
// left expired at once, and it stays a suspect (a person's retry runs it
// alone again).
var claimSuspectSQL = `-- hookd.claim_suspect
	WITH due AS (
		SELECT e.id, ` + leaseKeySQL("e") + ` AS event_id, e.attempts, e.claims, e.manual_retry, s.since FROM webhook_suspects s
		JOIN webhook_events e ON e.lease_key = s.event_id
		WHERE s.cleared_at IS NULL AND e.` + pending + ` AND e.next_retry_at <= now() AND NOT ` + replaySuspectSQL("s") + `
		  AND e.destination = ANY ($6)
		ORDER BY s.since, s.event_id
		LIMIT 8
		FOR UPDATE OF e SKIP LOCKED
	), held AS (` + heldLeasesSQL("SELECT event_id FROM due") + `
	), free AS (
		SELECT d.*, coalesce(h.started AND (SELECT x.alone FROM webhook_leases x WHERE x.event_id = d.event_id), false) AS crashed
		FROM due d LEFT JOIN held h USING (event_id)
		WHERE (h.event_id IS NULL AND NOT EXISTS (SELECT 1 FROM webhook_leases x WHERE x.event_id = d.event_id))
		   OR NOT h.live
		ORDER BY d.since, d.event_id
		LIMIT 1
	), leased AS (` + insertLeasesWithSQL(true, `
		SELECT f.event_id, $1::uuid, CASE WHEN f.manual_retry THEN 'manual' ELSE 'retry' END,
		       CASE WHEN f.attempts + f.crashed::int < $3 THEN now() + make_interval(secs => $2) ELSE now() END,
		       $5::uuid, NULL::timestamptz, f.attempts + f.crashed::int < $3
		FROM free f
		WHERE `+grantableSQL("$5")) + `
	), claimed AS (
		SELECT f.*, l.cut_short, f.attempts + CASE WHEN f.crashed THEN 1 ELSE 0 END AS counted
		FROM free f JOIN leased l USING (event_id)
	), suspected AS (
		UPDATE webhook_suspects s
		SET crashes = s.crashes + CASE WHEN c.crashed THEN 1 ELSE 0 END,
		    interruptions = s.interruptions + CASE WHEN c.cut_short AND NOT c.crashed THEN 1 ELSE 0 END,
		    ran_alone_at = CASE WHEN c.counted < $3 THEN now() ELSE s.ran_alone_at END
		FROM claimed c WHERE s.event_id = c.event_id
	), crashed AS (` + insertAttemptsSQL(`
		SELECT e.source, e.event_id, 0, 'failed', NULL::int, format($4, c.counted), 'retry', c.counted, NULL::text,
		       e.destination
		FROM claimed c JOIN webhook_events e ON e.id = c.id
		WHERE c.crashed`) + `
	)
	UPDATE webhook_events e
	SET attempts = c.counted,
	    status = CASE WHEN c.counted < $3 THEN e.status ELSE 'dead' END,
	    payload = ` + erasedPayloadSQL("e", "c.counted >= $3") + `,
	    last_error = CASE WHEN c.crashed THEN format($4, c.counted) ELSE e.last_error END,
	    last_attempt_at = CASE WHEN c.crashed THEN now() ELSE e.last_attempt_at END,
	    claims = CASE WHEN c.counted < $3 THEN c.claims + 1 ELSE 0 END,
	    manual_retry = false,
	    next_retry_at = CASE WHEN c.counted < $3 THEN now() + make_interval(secs => $2) ELSE e.next_retry_at END
	FROM claimed c
	WHERE e.id = c.id
	RETURNING e.id, e.source, e.event_id, e.event_type, e.payload, e.signature, e.status,
	          e.attempts, e.last_error, e.next_retry_at, e.created_at, e.last_attempt_at, e.manual_retry, e.claims,
	          e.endpoint, e.livemode, e.account, e.api_version, e.object_id, e.object_type, e.customer, e.snapshot_event,
	          e.trace_parent, c.manual_retry,
	          ` + markedSQL("e.event_id") + `, e.destination, e.lease_key, e.order_key`

// SuspectCounts is what the dashboard and /metrics say of suspects.
type SuspectCounts struct {
	// Open are the suspects not yet cleared: each runs alone next.
	Open int
	// Crashes are the attempts charged to suspects that died running
	// alone, over the suspects not yet cleared.
	Crashes int
}

// Suspects counts the suspects not yet cleared.
func (s *Store) Suspects(ctx context.Context) (SuspectCounts, error) {
	var c SuspectCounts
	err := s.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(crashes), 0) FROM webhook_suspects WHERE cleared_at IS NULL`).
		Scan(&c.Open, &c.Crashes)
	if err != nil {
		return SuspectCounts{}, fmt.Errorf("count suspects: %w", err)
	}
	return c, nil
}

// Suspect is what the event page says of an event that is, or was, a
// suspect.
type Suspect struct {
	Since         time.Time
	Path          AttemptPath
	Interruptions int
	Crashes       int
	RanAloneAt    *time.Time
	// ClearedAt is when a run alone completed: the event ran alone after
	// a crash and is a suspect no longer.
	ClearedAt *time.Time
}

// SuspectOf returns what became of eventID as a suspect, or nil when a
// crash never cut its run short.
func (s *Store) SuspectOf(ctx context.Context, eventID string) (*Suspect, error) {
	var sp Suspect
	err := s.db.QueryRow(ctx, `
		SELECT since, path, interruptions, crashes, ran_alone_at, cleared_at FROM webhook_suspects WHERE event_id = $1`,
		eventID).Scan(&sp.Since, &sp.Path, &sp.Interruptions, &sp.Crashes, &sp.RanAloneAt, &sp.ClearedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read suspect %s: %w", eventID, err)
	}
	return &sp, nil
}

// PruneSuspects deletes the rows of webhook_suspects that outlived their
// event, in batches of store.PruneBatchSize, and returns how many it
// deleted: a suspect cleared more than olderThan ago whose event is off
// the queue (its page has nothing left to say), and one never cleared,
// made more than olderThan ago, whose event hookd no longer holds at all,
// neither on the queue nor as a marker (a delivery cut short that Stripe
// never brought again). A suspect whose event is still queued, dead
// included, stays with it, as its attempt history does.
func (s *Store) PruneSuspects(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.DeleteInBatches(ctx, s.db, "suspects", `
		DELETE FROM webhook_suspects
		WHERE event_id = ANY (ARRAY(
			SELECT s.event_id FROM webhook_suspects s
			WHERE coalesce(s.cleared_at, s.since) < now() - make_interval(secs => $1)
			  AND NOT `+queuedSQL("$2", "s.event_id")+`
			  AND (s.cleared_at IS NOT NULL OR NOT `+markedSQL("s.event_id")+`)
			LIMIT $3))`,
		olderThan.Seconds(), SourceStripe)
}

// replaySuspectSQL is true when the suspect s (a webhook_suspects row)
// was cut short as a replay's member and is still a pending member of a
// running replay: it runs alone as that replay's delivery
// (ClaimReplaySuspect), not as a retry.
func replaySuspectSQL(s string) string {
	return `(` + s + `.path = '` + string(PathReplay) + `' AND EXISTS (
		SELECT 1 FROM replay_events m JOIN replays p ON p.id = m.replay_id
		WHERE m.event_id = ` + s + `.event_id AND m.state = '` + string(MemberPending) + `' AND p.state = '` +
		string(ReplayRunning) + `'))`
}

// ReplaySuspect is a replay's member that is a suspect, claimed for its
// run alone as the replay's delivery.
type ReplaySuspect struct {
	Replay RunningReplay
	// Owner is the token of the member's lease, marked alone.
	Owner uuid.UUID
	// Deadline is when the run must have ended, on this machine's clock.
	Deadline time.Time
	Member   ReplayMember
	// GivenUp: the member crashed hookd MaxAttempts times running alone.
	// It is not run again: settle it ReplaySettleCrashed, with Error.
	GivenUp bool
	Error   string
}

// ClaimReplaySuspect claims the oldest suspect that is a pending member of
// a running replay and can run now (its lease free), for a run alone of
// processFor as that replay's delivery: the lease taken not yet started
// (StartReplayed starts it) and marked alone. The claim that takes over
// the lease of a run alone that started and never reported charges that
// run as ClaimSuspect does: one crash, recorded in the attempt history
// with CrashedFormat, and one attempt of the event's queue row while it
// waits on the queue (dead at MaxAttempts). A member charged MaxAttempts
// crashes, or whose queue row a crash made dead, is returned GivenUp. It
// returns ok false when no such suspect can run now.
func (s *Store) ClaimReplaySuspect(ctx context.Context, processFor time.Duration) (c ReplaySuspect, ok bool, err error) {
	c.Owner, c.Deadline = uuid.New(), time.Now().Add(processFor)
	var eventID string
	err = s.db.QueryRow(ctx, claimReplaySuspectSQL, [16]byte(c.Owner), leaseSeconds(processFor), MaxAttempts, CrashedFormat,
		s.replica.arg()).Scan(&c.Replay.ID, &c.Replay.Name, &c.Replay.Dead, &c.Replay.Destination, &eventID, &c.GivenUp, &c.Error)
	if errors.Is(err, pgx.ErrNoRows) {
		return ReplaySuspect{}, false, nil
	}
	if err != nil {
		return ReplaySuspect{}, false, fmt.Errorf("claim a replay's suspect: %w", err)
	}
	members, err := s.replayMembers(ctx, []string{eventID})
	if err != nil {
		return ReplaySuspect{}, false, fmt.Errorf("read replay %d's suspect %s: %w", c.Replay.ID, eventID, err)
	}
	c.Member = members[0]
	return c, true, nil
}

// claimReplaySuspectSQL claims the oldest suspect cut short as a pending
// member of a running replay, for owner $1 of replica $5, with a lease of
// $2 seconds marked alone; $3 is MaxAttempts and $4 CrashedFormat. A run
// alone found crashed is charged here: the suspect's crashes, the attempt
// history (numbered as the queue row's attempts when the event waits on
// the queue, which are charged too, else as the crashes), and the queue
// row as claimSuspectSQL charges it. It returns the replay, the event,
// whether the member is given up, and the error it is given up with.
var claimReplaySuspectSQL = `-- hookd.claim_replay_suspect
	WITH due AS (
		SELECT m.replay_id, m.event_id, s.since FROM webhook_suspects s
		JOIN replay_events m ON m.event_id = s.event_id AND m.state = '` + string(MemberPending) + `'
		JOIN replays p ON p.id = m.replay_id AND p.state = '` + string(ReplayRunning) + `'
		WHERE s.cleared_at IS NULL AND s.path = '` + string(PathReplay) + `'
		ORDER BY s.since, s.event_id, m.replay_id
		LIMIT 8
		FOR UPDATE OF m SKIP LOCKED
	), held AS (` + heldLeasesSQL("SELECT event_id FROM due") + `
	), free AS (
		SELECT d.*, coalesce(h.started AND (SELECT x.alone FROM webhook_leases x WHERE x.event_id = d.event_id), false) AS crashed
		FROM due d LEFT JOIN held h USING (event_id)
		WHERE (h.event_id IS NULL AND NOT EXISTS (SELECT 1 FROM webhook_leases x WHERE x.event_id = d.event_id))
		   OR NOT h.live
		ORDER BY d.since, d.event_id, d.replay_id
		LIMIT 1
	), leased AS (` + insertLeasesWithSQL(true, `
		SELECT f.event_id, $1::uuid, '`+string(PathReplay)+`', now() + make_interval(secs => $2), $5::uuid,
		       NULL::timestamptz, true
		FROM free f
		WHERE `+grantableSQL("$5")) + `
	), claimed AS (
		SELECT f.*, l.cut_short FROM free f JOIN leased l USING (event_id)
	), suspected AS (
		UPDATE webhook_suspects s
		SET crashes = s.crashes + CASE WHEN c.crashed THEN 1 ELSE 0 END,
		    interruptions = s.interruptions + CASE WHEN c.cut_short AND NOT c.crashed THEN 1 ELSE 0 END,
		    ran_alone_at = now()
		FROM claimed c WHERE s.event_id = c.event_id
		RETURNING s.event_id, s.crashes
	), charged AS (
		UPDATE webhook_events e
		SET attempts = e.attempts + 1,
		    status = CASE WHEN e.attempts + 1 < $3 THEN e.status ELSE 'dead' END,
		    payload = ` + erasedPayloadSQL("e", "e.attempts + 1 >= $3") + `,
		    last_error = format($4, e.attempts + 1), last_attempt_at = now(), claims = 0
		FROM claimed c
		WHERE c.crashed AND e.source = '` + SourceStripe + `' AND e.event_id = c.event_id AND e.` + pending + `
		RETURNING e.event_id, e.attempts, e.status, e.last_error
	), numbered AS (
		SELECT c.*, s.crashes, coalesce(q.attempts, (
		           SELECT e.attempts FROM webhook_events e WHERE e.source = '` + SourceStripe + `' AND e.event_id = c.event_id
		       ), s.crashes) AS number
		FROM claimed c JOIN suspected s USING (event_id) LEFT JOIN charged q USING (event_id)
	), recorded AS (` + insertAttemptsSQL(`
		SELECT '`+SourceStripe+`', n.event_id, 0, 'failed', NULL::int, format($4, n.number), '`+string(PathReplay)+`',
		       n.number, NULL::text, '`+DefaultDestination+`'
		FROM numbered n
		WHERE n.crashed`) + `
	)
	SELECT n.replay_id, p.name, coalesce((p.filter->>'dead')::boolean, false), coalesce(p.destination, ''), n.event_id,
	       n.crashes >= $3 OR coalesce(q.status = 'dead' AND q.last_error = format($4, q.attempts), false),
	       format($4, n.number)
	FROM numbered n JOIN replays p ON p.id = n.replay_id
	LEFT JOIN LATERAL (
		SELECT coalesce(c.status, e.status) AS status, coalesce(c.last_error, e.last_error) AS last_error,
		       coalesce(c.attempts, e.attempts) AS attempts
		FROM webhook_events e LEFT JOIN charged c ON c.event_id = e.event_id
		WHERE e.source = '` + SourceStripe + `' AND e.event_id = n.event_id
	) q ON true`

// suspectColumns holds the delivery keys of a suspect event's fan-out, with
// the path of the run that made the event one, for a statement of their
// own in the outcome's transaction.
type suspectColumns struct {
	keys, paths []string
}

func (c *suspectColumns) add(key string, path AttemptPath) {
	c.keys = append(c.keys, key)
	c.paths = append(c.paths, string(path))
}

// suspectDeliveriesSQL makes suspects of the deliveries $1 (paths $2): a
// fan-out of an event whose run was cut short puts each destination's
// delivery on the queue, and each runs alone.
const suspectDeliveriesSQL = `-- hookd.suspect_deliveries
	INSERT INTO webhook_suspects (event_id, path, interruptions)
	SELECT k.key, k.path, 0 FROM unnest($1::text[], $2::text[]) AS k(key, path)
	ON CONFLICT (event_id) DO NOTHING`

func (c *suspectColumns) queue(b *pgx.Batch) {
	if len(c.keys) > 0 {
		b.Queue(suspectDeliveriesSQL, c.keys, c.paths)
	}
}

func (c *suspectColumns) read(br pgx.BatchResults) error {
	if len(c.keys) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}
