package queue

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Claimed is an event the retry loop claimed for an attempt, with its lease.
type Claimed struct {
	// Event is the row as the claim left it, but for Attempts: the number
	// of the attempt about to start, which the row counts once it has an
	// outcome (or a claim finds it interrupted).
	Event Event
	// Owner is the token of the event's lease.
	Owner uuid.UUID
	// Path is manual when a person asked for this attempt, retry otherwise.
	Path AttemptPath
	// Processed: the event has a dedup marker already; settle it Done
	// without running it.
	Processed bool
	// Dead: the previous attempt was the last one and never reported an
	// outcome, so the claim made the event dead instead; nothing is to run
	// and no lease is held.
	Dead bool
}

// Key is the key of the claimed delivery's lease (DeliveryKey).
func (c Claimed) Key() string { return cmp.Or(c.Event.LeaseKey, c.Event.EventID) }

// Attempts is a claim of the retry loop: the events it holds and when
// every processor run under their leases must have ended, on this
// machine's clock.
type Attempts struct {
	Claimed  []Claimed
	Deadline time.Time
}

// ClaimAttempts claims up to n due events for an attempt each, in one
// statement: it selects them FOR UPDATE SKIP LOCKED, so other claims skip
// them, takes each one's lease for a processor run of processFor (not yet
// started) and pushes the event's next_retry_at to when the lease expires.
// Each attempt counts from when its own run starts (SettleAndStart marks
// its lease), not from the claim: a crash counts none of the batch's
// others. A suspect (suspects.go) is never claimed: it runs alone, through
// ClaimSuspect. An event whose lease the claim finds with a run that
// started and never reported (its process died) is not claimed either: it
// is charged nothing, becomes a suspect with SuspectError, and its lease is
// left free for its run alone. A pending row at MaxAttempts whose last
// attempt was counted and never settled is made dead (Claimed.Dead).
//
// An event whose lease another holder has (a delivery or recovery of the
// same event at this moment) is left as it is, due, for a later claim.
// Give each claimed event back with SettleAndStart.
func (s *Store) ClaimAttempts(ctx context.Context, n int, processFor time.Duration) (Attempts, error) {
	return s.ClaimDeliveries(ctx, DefaultDestination, n, processFor)
}

// ClaimDeliveries is ClaimAttempts of the deliveries to destination: each
// destination's retry loop claims its own, so that one whose app is slow or
// down takes no claim, slot or lease from another's.
func (s *Store) ClaimDeliveries(ctx context.Context, destination string, n int, processFor time.Duration) (Attempts, error) {
	owner := uuid.New()
	a := Attempts{Deadline: time.Now().Add(processFor)}
	rows, err := s.db.Query(ctx, claimAttemptsSQL, n, [16]byte(owner), leaseSeconds(processFor), MaxAttempts, SuspectError,
		s.replica.arg(), cmp.Or(destination, DefaultDestination))
	if err != nil {
		return Attempts{}, fmt.Errorf("claim attempts: %w", err)
	}
	if a.Claimed, err = collectClaimed(rows, owner); err != nil {
		return Attempts{}, fmt.Errorf("claim attempts: %w", err)
	}
	return a, nil
}

// collectClaimed reads the claimed events a claim returns, for owner.
func collectClaimed(rows pgx.Rows, owner uuid.UUID) ([]Claimed, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Claimed, error) {
		return scanClaimed(row, owner)
	})
}

// scanClaimed reads a claimed event as claimAttemptsSQL and
// claimSuspectSQL return it, for owner: its path (a person's retry, or the
// loop's), whether its last attempt left it dead, and, when not, its
// Attempts counting the attempt about to start.
func scanClaimed(row pgx.Row, owner uuid.UUID) (Claimed, error) {
	var c Claimed
	var e Event
	var manual bool
	err := row.Scan(&e.ID, &e.Source, &e.EventID, &e.EventType, &e.Payload, &e.Signature, &e.Status,
		&e.Attempts, &e.LastError, &e.NextRetryAt, &e.CreatedAt, &e.LastAttemptAt, &e.ManualRetry, &e.Claims,
		&e.Endpoint, &e.Livemode, &e.Account, &e.APIVersion, &e.ObjectID, &e.ObjectType, &e.Customer, &e.SnapshotEvent,
		&e.TraceParent, &manual, &c.Processed, &e.Destination, &e.LeaseKey, &e.OrderKey)
	c.Event, c.Owner, c.Path = e, owner, PathRetry
	if manual {
		c.Path = PathManual
	}
	c.Dead = e.Status == StatusDead
	if !c.Dead {
		c.Event.Attempts++
	}
	return c, err
}

// claimAttemptsSQL claims up to $1 due deliveries to destination $7 for
// owner $2 of replica $6 with leases of $3 seconds; $4 is MaxAttempts, and
// $5 SuspectError.
//
// An interrupted run is one that started under a lease that is no longer
// live and never reported: its event becomes a suspect here, uncharged,
// due at once for its run alone, and is not returned. claims counts the
// claims since the last outcome, for the stuck check (stuck.go); a pending
// row at MaxAttempts with claims > 0 is one whose last attempt was counted
// and never settled (a row left so by a release before): it is made dead,
// its lease taken only to check that no one has it and left expired at
// once.
var claimAttemptsSQL = claimSQL("-- hookd.claim", "")

// claimSQL is claimAttemptsSQL named name, its due deliveries filtered
// by the condition and (claimOrderedSQL's turns).
func claimSQL(name, and string) string {
	return name + `
	WITH due AS (
		SELECT id, ` + leaseKeySQL("webhook_events") + ` AS event_id, attempts, claims, manual_retry FROM webhook_events
		WHERE ` + pending + `
		  AND destination = $7
		  AND (attempts < $4 OR claims > 0)
		  AND next_retry_at <= now()
		  AND ` + notSuspectSQL("webhook_events.lease_key") + and + `
		ORDER BY next_retry_at
		LIMIT $1
		FOR UPDATE SKIP LOCKED
	), held AS (` + heldLeasesSQL("SELECT event_id FROM due") + `
	), free AS (
		SELECT d.*, d.attempts AS counted, coalesce(h.started, false) AS interrupted
		FROM due d LEFT JOIN held h USING (event_id)
		WHERE (h.event_id IS NULL AND NOT EXISTS (SELECT 1 FROM webhook_leases x WHERE x.event_id = d.event_id))
		   OR NOT h.live
	), leased AS (` + insertLeasesSQL(`
		SELECT f.event_id, $2::uuid, CASE WHEN f.manual_retry THEN 'manual' ELSE 'retry' END,
		       CASE WHEN f.counted < $4 AND NOT f.interrupted THEN now() + make_interval(secs => $3) ELSE now() END,
		       $6::uuid, NULL::timestamptz
		FROM free f
		WHERE `+grantableSQL("$6")+`
		ORDER BY f.event_id`) + `
	), claimed AS (
		-- The rows leased, read again by their lease keys' index, not
		-- joined with free: both are CTEs, and when the planner guesses
		-- one row for due (as it does for ClaimOrderedDeliveries' list of
		-- ids under its filters), it joins them in a nested loop, rows
		-- times rows. Under due's row locks, e holds what due read, and
		-- an existing lease taken over was started (cut_short) exactly
		-- when free counted it interrupted.
		SELECT e.id, l.event_id, e.attempts AS counted, l.cut_short AS interrupted, e.claims, e.manual_retry
		FROM leased l JOIN webhook_events e ON e.lease_key = l.event_id COLLATE "C"
		WHERE e.destination = $7 AND e.` + pending + `
	), suspected AS (` + suspectedSQL("leased") + `
	), updated AS (
		UPDATE webhook_events e
		SET attempts = c.counted,
		    status = CASE WHEN c.counted < $4 THEN e.status ELSE 'dead' END,
		    payload = ` + erasedPayloadSQL("e", "c.counted >= $4") + `,
		    last_error = CASE WHEN c.interrupted THEN $5 ELSE e.last_error END,
		    claims = CASE WHEN c.counted >= $4 THEN 0 WHEN c.interrupted THEN c.claims ELSE c.claims + 1 END,
		    manual_retry = CASE WHEN c.interrupted AND c.counted < $4 THEN e.manual_retry ELSE false END,
		    next_retry_at = CASE WHEN c.counted >= $4 THEN e.next_retry_at WHEN c.interrupted THEN now()
		                         ELSE now() + make_interval(secs => $3) END
		FROM claimed c
		WHERE e.id = c.id
		RETURNING e.id, e.source, e.event_id, e.event_type, e.payload, e.signature, e.status,
		          e.attempts, e.last_error, e.next_retry_at, e.created_at, e.last_attempt_at, e.manual_retry, e.claims,
		          e.endpoint, e.livemode, e.account, e.api_version, e.object_id, e.object_type, e.customer, e.snapshot_event,
		          e.trace_parent, c.manual_retry AS asked_manual,
		          ` + markedSQL("e.event_id") + ` AS processed, c.interrupted AND c.counted < $4 AS suspect,
		          e.destination, e.lease_key, e.order_key
	)
	SELECT id, source, event_id, event_type, payload, signature, status, attempts, last_error, next_retry_at, created_at,
	       last_attempt_at, manual_retry, claims, endpoint, livemode, account, api_version, object_id, object_type, customer,
	       snapshot_event, trace_parent, asked_manual, processed, destination, lease_key, order_key
	FROM updated WHERE NOT suspect`
}

// startOp is the starting part of SettleAndStart's short transaction.
type startOp struct {
	ids    []string
	owners []uuid.UUID
	marked []leaseKey
}

func newStartOp(claimed []Claimed) *startOp {
	n := len(claimed)
	op := &startOp{ids: make([]string, n), owners: make([]uuid.UUID, n)}
	for i, c := range claimed {
		op.ids[i], op.owners[i] = c.Key(), c.Owner
	}
	return op
}

func (op *startOp) queue(b *pgx.Batch) {
	if len(op.ids) > 0 {
		b.Queue(startAttemptsSQL, op.ids, uuidArray(op.owners))
	}
}

// startAttemptsSQL marks started the leases of events $1 still held by
// owners $2, and returns the leases it marked. The mark is all a start
// writes: the lease is unlogged, so a start costs no WAL and, alone in its
// transaction, no flushed commit. The queue row is written once per
// attempt, with its outcome. A database crash loses the marks with the
// leases, and the attempts that were running then are not counted: they
// are the database's failure, not the event's.
const startAttemptsSQL = `-- hookd.start_attempts
	UPDATE webhook_leases l SET started_at = now()
	WHERE l.event_id = ANY ($1::text[])
	  AND (l.event_id, l.owner) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))
	RETURNING l.event_id, l.owner`

func (op *startOp) read(br pgx.BatchResults) (err error) {
	if len(op.ids) > 0 {
		op.marked, err = collect(br, pgx.RowToStructByPos[leaseKey])
	}
	return err
}

func (op *startOp) started() []bool { return written(op.marked, op.ids, op.owners) }

// SettleKind is what became of a claimed event's attempt.
type SettleKind string

const (
	// Done: processed, now or before the claim; the row goes, the marker
	// stays.
	SettleDone SettleKind = "done"
	// Failed: the attempt failed; the event waits for its next one, or is
	// dead.
	SettleFailed SettleKind = "failed"
	// Released: the attempt never ran, or shutdown cut it short, which
	// says nothing about the event: it is given back, due at once, and the
	// attempt is not counted.
	SettleReleased SettleKind = "released"
)

// Settled is a claimed event after its attempt, as SettleAndStart takes it.
type Settled struct {
	Claimed Claimed
	Kind    SettleKind
	// Attempt is the attempt to record; nil for none.
	Attempt *NewAttempt
	// Fenced: released because its replica's fence stopped the run
	// (fenced.go), which is counted.
	Fenced bool
}

// SettledState is what SettleAndStart made of one settled event.
type SettledState struct {
	// Written is false when the event's lease was no longer its owner's:
	// nothing of its outcome was written (ErrLeaseLost).
	Written bool
	// Status is a failed event's new status.
	Status Status
	// Hastened: a person asked for a retry while the attempt ran, so the
	// failed event is due again at once.
	Hastened bool
}

// SettleAndStart settles the claimed events settled, then starts the runs
// of the claimed events start, in one short transaction: a retry worker
// writes the outcome of its event and starts its next in one round trip,
// with the other workers that reach the database at that moment. Either
// may be empty.
//
// Settling writes the outcomes and gives the leases back, in one
// statement, and returns what became of each, in order. A run released
// because the fence stopped it (Settled.Fenced) is counted first
// (fenced.go). A success deletes
// the row and writes the marker together; a failure makes the event
// retrying with the backoff of its attempt, or dead at MaxAttempts
// (without its payload, if its customer's payloads were erased while it
// waited: see payloadErasedSQL), unless a person asked for a retry while
// it ran (see RetryNow): then it is due at once, and a dead one starts its
// attempts over as RetryDead would. One statement means one outcome's
// failure fails all of them; the caller settles each alone when that
// happens.
//
// Starting records that the runs start now, each on its lease, and
// returns for each whether it may run: false when its lease is no longer
// its owner's. From there the attempt counts, whatever becomes of the
// process: its outcome counts it on the queue row, and if the process dies
// first, the claim that takes its lease over counts it as interrupted.
func (s *Store) SettleAndStart(ctx context.Context, settled []Settled, start []Claimed) ([]SettledState, []bool, error) {
	settling, starting := s.newRetrySettle(settled), newStartOp(start)
	var fenced fenceCutOp
	for _, st := range settled {
		if st.Fenced && st.Kind == SettleReleased {
			fenced.add(st.Claimed.Key(), st.Claimed.Owner)
		}
	}
	var done []string
	for _, st := range settled {
		if st.Kind == SettleDone {
			done = append(done, st.Claimed.Event.EventID)
		}
	}
	err := s.shortTx(ctx, func(b *pgx.Batch) {
		if len(done) > 0 {
			b.Queue(lockDeliveriesSQL, done)
		}
		fenced.queue(b)
		settling.queue(b)
		starting.queue(b)
	}, func(br pgx.BatchResults) error {
		if len(done) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := fenced.read(br); err != nil {
			return err
		}
		if err := settling.read(br); err != nil {
			return err
		}
		return starting.read(br)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("settle attempts: %w", err)
	}
	return settling.states(), starting.started(), nil
}

// lockDeliveriesSQL locks the queue rows of the events $1, in one order,
// before the statement that resolves some of them: two deliveries of one
// event resolved at once by two transactions would each see the other's
// row still there, and neither would write the event's marker. The second
// waits here for the first to commit, and its next statement sees that
// row gone. An event of one delivery, as nearly all are, locks the row its
// resolution deletes anyway.
const lockDeliveriesSQL = `-- hookd.lock_deliveries
	SELECT 1 FROM webhook_events
	WHERE source = '` + SourceStripe + `' AND event_id = ANY ($1::text[])
	ORDER BY id
	FOR UPDATE`

// retrySettleOp is the settling part of SettleAndStart's short transaction:
// settleAttemptsSQL's columns, and the breaker's count of the outcomes.
type retrySettleOp struct {
	breaker breakerConfig
	ids     []string
	args    []any
	tally   breakerTally
	counted bool
	// destTally counts the calls by destination, with several
	// (WithDestinationBreakers).
	destTally   destinationTallies
	destCounted bool
	results     []retrySettled
}

// retrySettled is a row settleAttemptsSQL returns.
type retrySettled struct {
	ID       string
	Status   string
	Hastened bool
}

func (s *Store) newRetrySettle(settled []Settled) *retrySettleOp {
	n := len(settled)
	op := &retrySettleOp{breaker: s.breaker, ids: make([]string, n)}
	eventIDs, kinds, statuses, errs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	hows, payloads, attempted := make([]string, n), make([][]byte, n), make([]bool, n)
	owners, waits := make([]uuid.UUID, n), make([]*float64, n)
	var a attemptColumns
	for i, st := range settled {
		c := st.Claimed
		op.ids[i], eventIDs[i], owners[i], kinds[i] = c.Event.ID.String(), c.Key(), c.Owner, string(st.Kind)
		hows[i] = string(LogRetry)
		if c.Path == PathManual {
			hows[i] = string(LogManual)
		}
		if st.Kind == SettleDone {
			payloads[i] = compressPayload([]byte(c.Event.Payload))
		}
		if st.Kind == SettleFailed {
			var status Status
			status, waits[i] = s.afterFailure(c.Event.Attempts)
			statuses[i] = string(status)
			if st.Attempt != nil {
				errs[i] = st.Attempt.Error
			}
		}
		if st.Attempt != nil {
			attempted[i] = true
			at := *st.Attempt
			at.Destination = cmp.Or(at.Destination, c.Event.Destination)
			a.addKeyed(at, c.Owner, c.Key())
			if s.breaker.perDestination != nil {
				op.destTally.add(at.Destination, st.Attempt, st.Kind == SettleDone)
			} else {
				op.tally.add(st.Attempt, st.Kind == SettleDone)
			}
		}
	}
	op.args = append([]any{op.ids, eventIDs, uuidArray(owners), kinds, statuses, waits, errs, hows, payloads, attempted},
		a.args()...)
	return op
}

func (op *retrySettleOp) queue(b *pgx.Batch) {
	if len(op.ids) > 0 {
		b.Queue(settleAttemptsSQL, op.args...)
		op.counted = op.tally.queue(b, op.breaker)
		op.destCounted = op.destTally.queue(b, op.breaker.perDestination)
	}
}

func (op *retrySettleOp) read(br pgx.BatchResults) (err error) {
	if len(op.ids) == 0 {
		return nil
	}
	if op.results, err = collect(br, pgx.RowToStructByPos[retrySettled]); err != nil {
		return err
	}
	if op.counted {
		if err := op.tally.read(br, op.breaker); err != nil {
			return err
		}
	}
	if op.destCounted {
		return op.destTally.read(br, op.breaker.perDestination)
	}
	return nil
}

// states is what became of each settled event, in order.
func (op *retrySettleOp) states() []SettledState {
	byID := make(map[string]retrySettled, len(op.results))
	for _, r := range op.results {
		byID[r.ID] = r
	}
	out := make([]SettledState, len(op.ids))
	for i, id := range op.ids {
		if r, ok := byID[id]; ok {
			out[i] = SettledState{Written: true, Status: Status(r.Status), Hastened: r.Hastened}
		}
	}
	return out
}

// settleAttemptsSQL releases the leases of the claimed rows $1 (events $2,
// owners $3) and writes each released one's outcome by its kind $4: for a
// failure, its new status $5, the seconds to its next attempt $6 (NULL for
// none) and its error $7; for a success, its marker with the event log's
// columns from the queue row, how it was processed $8 (retry or manual),
// and its payload $9 (compressPayload); $10 says which outcomes bring an
// attempt to record, and those attempts follow from $11 on. It returns
// each released row with a failure's new status and whether a person
// hastened it. The attempt of a run that started (its lease says so:
// SettleAndStart), or that brings its record, is counted here, with its
// outcome; a release, or a success found already processed, counts none.
// A suspect's run alone that completed, a success or a failure, clears the
// suspect; one given back leaves it a suspect.
var settleAttemptsSQL = `-- hookd.settle_attempts
	WITH freed AS (` + releaseLeasesSQL("$2", "$3") + `
	), released AS (
		SELECT o.*, f.started, f.alone FROM freed f
		JOIN unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::float8[], $7::text[], $8::text[], $9::bytea[],
		            $10::bool[])
		     AS o(id, event_id, owner, kind, new_status, wait, error, how, payload, attempted)
		  ON o.event_id = f.event_id AND o.owner = f.owner
	), resolved AS (
		DELETE FROM webhook_events e USING released r
		WHERE e.id = r.id AND r.kind = 'done'
		RETURNING e.event_id, e.event_type, e.endpoint, e.livemode, e.account, e.api_version, e.object_id, e.object_type,
		          e.customer, e.stripe_created, e.created_at, e.attempts + CASE WHEN r.started OR r.attempted THEN 1 ELSE 0 END AS attempts, r.payload, r.how, e.payload_erased_at,
		          e.payload_erased_by, e.id
	), marked AS (` + insertResolvedMarkersSQL + `
	), failed AS (
		UPDATE webhook_events e
		SET status = CASE WHEN e.manual_retry AND r.new_status = 'dead' THEN 'failed' ELSE r.new_status END,
		    attempts = CASE WHEN e.manual_retry AND r.new_status = 'dead' THEN 0
		                    ELSE e.attempts + CASE WHEN r.started OR r.attempted THEN 1 ELSE 0 END END,
		    payload = ` + erasedPayloadSQL("e", "r.new_status = 'dead' AND NOT e.manual_retry") + `,
		    next_retry_at = CASE WHEN e.manual_retry THEN now()
		                         ELSE coalesce(now() + make_interval(secs => r.wait), e.next_retry_at) END,
		    last_error = r.error, last_attempt_at = now(), claims = 0
		FROM released r
		WHERE e.id = r.id AND r.kind = 'failed'
		RETURNING e.id, e.status, e.manual_retry
	), given_back AS (
		UPDATE webhook_events e
		SET claims = greatest(e.claims - 1, 0), next_retry_at = now()
		FROM released r
		WHERE e.id = r.id AND r.kind = 'released' AND e.` + pending + `
	), recorded AS (` + givenAttemptsSQL(11, "released") + `
	), cleared AS (
		UPDATE webhook_suspects s SET cleared_at = now()
		FROM released r
		WHERE s.event_id = r.event_id AND r.alone AND r.kind IN ('done', 'failed') AND s.cleared_at IS NULL
	)
	SELECT r.id::text, coalesce(f.status, ''), coalesce(f.manual_retry, false)
	FROM released r LEFT JOIN failed f ON f.id = r.id`
