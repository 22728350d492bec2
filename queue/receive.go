package queue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DeliveryState is where a delivered event stands once Exchange has tried
// its lease or its marker.
type DeliveryState int

const (
	// DeliveryNew: no dedup marker and no queue row, and the lease is
	// held; process it, then settle it with SettleDeliveries.
	DeliveryNew DeliveryState = iota + 1
	// DeliveryProcessed: the event has a dedup marker; nothing is to run,
	// and no lease is held.
	DeliveryProcessed
	// DeliveryQueued: the event has a row on the retry queue (dead
	// included), which owns it; no lease is held.
	DeliveryQueued
	// DeliveryBusy: another holder has a live lease on the event, or the
	// event came twice in one batch; answer that it is being handled.
	DeliveryBusy
	// DeliveryMarked: an outcome to mark (Exchange.Mark) was written: the
	// event had no marker, no queue row and no lease, and has its marker.
	DeliveryMarked
	// DeliveryLeased: an outcome to mark was not written because a lease,
	// live or expired, is on the event: its delivery takes the lease, as
	// one that runs a processor does, and finds out from that.
	DeliveryLeased
	// DeliveryUngranted: no lease may be granted to the Store's replica
	// now (grantableSQL), whoever holds the event: queue it without one
	// (QueueUngranted) or answer ErrNotGranted.
	DeliveryUngranted
	// DeliveryQueuedUngranted: QueueUngranted put the new event on the
	// retry queue without a lease; the retry loop runs it once it can take
	// one.
	DeliveryQueuedUngranted
)

// Deliveries is a batch of deliveries after Exchange: their leases, all
// with one owner token, and each event's state, in order.
type Deliveries struct {
	Owner uuid.UUID
	// Deadline is when every processor run under these leases must have
	// ended, on this machine's clock: processFor after the moment before
	// the leases were asked for, so before they expire.
	Deadline time.Time
	States   []DeliveryState
	// Interrupted, for a DeliveryNew event that is a suspect (suspects.go):
	// its lease was taken over from a run that started and never reported
	// (hookd killed while the app had the event), now or before, is that
	// run's path; empty otherwise. The event is never run inline: it goes
	// on the retry queue, charged nothing, and runs alone.
	Interrupted []AttemptPath
	// Turns, for a DeliveryNew event that runs, are the turns of its
	// Delivery.Turns, taken with Owner.
	Turns [][]OrderTurn
}

// Delivery is one event of a batch to take the lease of: its id, and who
// brings it, which the lease records.
type Delivery struct {
	EventID string
	Path    AttemptPath
	// Runs: the processor runs as soon as the lease is taken, so the lease
	// records its start (a deferred delivery's does not run).
	Runs bool
	// Turns are the keys of the event's deliveries to ordered
	// destinations: a delivery that runs takes their turns with its lease
	// (Deliveries.Turns), in the same transaction.
	Turns []OrderKey
}

// Exchange is what one of the receiver's short transactions writes and
// reads: under load the receiver writes the outcomes of the deliveries
// whose processors just ended, takes the leases of those that just arrived,
// and marks those that need no processor run, in one round trip and one
// commit.
type Exchange struct {
	// Source is the source of the events to take and to mark.
	Source string
	// Settle holds the outcomes of leased deliveries, each written with
	// its lease's release.
	Settle []Received
	// Take holds the deliveries whose leases to take, for processor runs
	// of at most ProcessFor.
	Take       []Delivery
	ProcessFor time.Duration
	// Mark holds the outcomes of new deliveries that run no processor (a
	// test-mode event an endpoint discards, any event under the discard
	// processor): a marker with its event log columns and no attempt. Each
	// is written only when the event has no marker, no queue row and no
	// lease; a lease protects a processor run, and with no run there is
	// nothing for one to keep to one at a time, so such a delivery costs
	// what the seed's does: one statement, one commit.
	Mark []Received
	// Beat also moves the Store's replica's beat to now, before the leases
	// are taken (worker.Heartbeat's Overdue): the transaction proves the
	// replica reaches the database as a beat does, and the leases it takes
	// are granted on that beat, not on an older one the replica's own
	// clock may have given up on.
	Beat bool
}

// Exchanged is what an Exchange wrote and read, each in its order.
type Exchanged struct {
	// Written says, for each outcome of Settle, whether it was written:
	// false when its lease was no longer its owner's (ErrLeaseLost), and
	// then nothing of it was.
	Written []bool
	// Taken is the Take deliveries' leases and states.
	Taken Deliveries
	// Marked is each Mark outcome's state: DeliveryMarked,
	// DeliveryProcessed, DeliveryQueued, or DeliveryLeased.
	Marked []DeliveryState
	// Beaten: Beat moved the replica's beat. It does not when the
	// replica's row is gone (Store.Beat's registered), and the Store's own
	// heartbeat registers it again.
	Beaten bool
}

// SettleDeliveries writes the outcomes of leased deliveries and gives their
// leases back, in one short transaction, and returns for each whether it
// was written: false when its lease was no longer its owner's
// (ErrLeaseLost), and then nothing of it was. Every write is idempotent: a
// marker or a queue row that exists is left as it is.
func (s *Store) SettleDeliveries(ctx context.Context, rs []Received) ([]bool, error) {
	x, err := s.Exchange(ctx, Exchange{Settle: rs})
	return x.Written, err
}

// Exchange does, in one short transaction, what x asks: writes the Settle
// outcomes as SettleDeliveries does; reads whether each Take event has a
// marker or a queue row and takes the lease of each that has neither; and
// writes the Mark outcomes of events that have no marker, no queue row and
// no lease. The outcomes are written first, so a redelivery in Take or
// Mark of an event settled in Settle finds its marker.
//
// Read before write: a redelivery of an event processed or queued is
// answered from its state, with no lease, no transaction id and no WAL,
// even while another path holds the event's lease. The states of the
// events it leased are read again by a statement after the one that took
// them, so they see whatever the previous holders committed with their
// release; the lease of one that turns out processed or queued is given
// back in that same statement: only DeliveryNew events stay leased.
//
// One transaction means one statement's failure fails all of it; the
// caller then does each delivery alone, so that one event's bad write never
// changes another's outcome.
func (s *Store) Exchange(ctx context.Context, x Exchange) (Exchanged, error) {
	st := newSettleOp(x.Settle)
	defer st.log.release()
	tk := newTakeOp(x.Take, x.ProcessFor)
	mk := newMarkOp(x.Mark)
	defer mk.log.release()
	if len(st.eventID)+len(tk.ids)+len(mk.ids) == 0 {
		return Exchanged{Written: st.written(), Taken: tk.result(), Marked: mk.result()}, nil
	}
	var counted, destCounted bool
	beat := x.Beat && s.replica != nil
	var beaten bool
	err := s.shortTx(ctx, func(b *pgx.Batch) {
		if beat {
			b.Queue(beatSQL, s.replica.arg())
		}
		st.queue(b)
		tk.queue(b, x.Source, s.replica.arg())
		mk.queue(b, x.Source)
		st.tally.merge(mk.tally)
		counted = st.tally.queue(b, s.breaker)
		destCounted = st.destTally.queue(b, s.breaker.perDestination)
	}, func(br pgx.BatchResults) error {
		if beat {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			beaten = tag.RowsAffected() == 1
		}
		if err := st.read(br); err != nil {
			return err
		}
		if err := tk.read(br); err != nil {
			return err
		}
		if err := mk.read(br); err != nil {
			return err
		}
		if counted {
			if err := st.tally.read(br, s.breaker); err != nil {
				return err
			}
		}
		if destCounted {
			return st.destTally.read(br, s.breaker.perDestination)
		}
		return nil
	})
	if err != nil {
		return Exchanged{}, fmt.Errorf("settle, lease and mark deliveries: %w", err)
	}
	return Exchanged{Written: st.written(), Taken: tk.result(), Marked: mk.result(), Beaten: beaten}, nil
}

// markOp is the marking part of Exchange's short transaction.
type markOp struct {
	// ids holds each event once, with its log columns in log; at[i] is
	// the place in ids of the batch's i-th outcome.
	ids    []string
	log    logColumns
	at     []int
	seen   activityColumns
	misses routeMissColumns
	tally  breakerTally
	found  []markedState
}

// markedState is what markUnleasedSQL read and wrote of one event.
type markedState struct {
	Processed, Queued, Leased, Marked bool
}

func newMarkOp(rs []Received) *markOp {
	op := &markOp{}
	if len(rs) == 0 {
		return op
	}
	op.at = make([]int, len(rs))
	place := make(map[string]int, len(rs))
	op.log.grow(len(rs))
	for i, r := range rs {
		if p, ok := place[r.EventID]; ok {
			op.at[i] = p
			continue
		}
		place[r.EventID] = len(op.ids)
		op.at[i] = len(op.ids)
		op.ids = append(op.ids, r.EventID)
		op.log.add(r.Log)
		if r.Seen != nil {
			op.seen.add(*r.Seen)
		}
		op.misses.add(r.EventID, r.RouteMisses)
	}
	return op
}

func (op *markOp) queue(b *pgx.Batch, source string) {
	if len(op.ids) > 0 {
		b.Queue(markUnleasedSQL, append([]any{source, op.ids}, op.log.args()...)...)
		op.seen.queue(b)
		op.misses.queue(b)
	}
}

func (op *markOp) read(br pgx.BatchResults) (err error) {
	if len(op.ids) == 0 {
		return nil
	}
	if op.found, err = collect(br, pgx.RowToStructByPos[markedState]); err != nil {
		return err
	}
	if err := op.seen.read(br); err != nil {
		return err
	}
	return op.misses.read(br)
}

// result is each outcome's state. An event marked twice in one batch is
// written once: its second outcome finds it processed.
func (op *markOp) result() []DeliveryState {
	if len(op.at) == 0 {
		return nil
	}
	out := make([]DeliveryState, len(op.at))
	first := make([]bool, len(op.ids))
	for i, p := range op.at {
		f := op.found[p]
		switch {
		case f.Marked && !first[p]:
			out[i] = DeliveryMarked
			first[p] = true
		case f.Queued:
			out[i] = DeliveryQueued
		case f.Leased:
			out[i] = DeliveryLeased
		default:
			// Processed before, or by a delivery that wrote the marker
			// first and committed while this one waited on it.
			out[i] = DeliveryProcessed
		}
	}
	return out
}

// markUnleasedSQL writes the markers, with their event log columns ($3-$13,
// as logColumns orders them), of the events $2 of source $1 that have no
// marker, no queue row and no lease, and returns, in the order of $2, what
// it read of each and whether it wrote its marker. A marker written
// meanwhile by another transaction is waited for and kept.
var markUnleasedSQL = `-- hookd.mark
	WITH l AS MATERIALIZED (
		SELECT l.*, ` + markedSQL("l.event_id") + ` AS processed, ` + queuedSQL("$1", "l.event_id") + ` AS queued,
		       (SELECT true FROM webhook_leases x WHERE x.event_id = l.event_id) IS NOT NULL AS leased
		FROM unnest($2::text[], ` + logUnnestSQL(3) + `) WITH ORDINALITY AS l(event_id, ` + logNamesSQL + `, ord)
	), marked AS (` + insertMarkersSQL(`
		FROM l WHERE NOT l.processed AND NOT l.queued AND NOT l.leased`) + `
		RETURNING event_id
	)
	SELECT l.processed, l.queued, l.leased, m.event_id IS NOT NULL
	FROM l LEFT JOIN marked m ON m.event_id = l.event_id
	ORDER BY l.ord`

// takeOp is the taking part of Exchange's short transaction.
type takeOp struct {
	batch      []Delivery
	processFor time.Duration
	d          Deliveries
	ids        []string
	paths      []AttemptPath
	runs       []bool
	first      []takenState
	again      map[string]rechecked
	turns      orderTakeOp
}

// rechecked is what recheckTakenSQL read of one event it leased.
type rechecked struct {
	EventID           string
	Processed, Queued bool
	// Suspect is the path of the run that made the event a suspect, if
	// it is one.
	Suspect *string
}

// takenState is what the statement that takes leases found of one event.
type takenState struct {
	Processed, Queued, Taken bool
	Interrupted              *string
	Grantable                bool
}

func newTakeOp(batch []Delivery, processFor time.Duration) *takeOp {
	op := &takeOp{batch: batch, processFor: processFor}
	if len(batch) == 0 {
		return op
	}
	op.d = Deliveries{Owner: uuid.New(), Deadline: time.Now().Add(processFor), States: make([]DeliveryState, len(batch)),
		Interrupted: make([]AttemptPath, len(batch))}
	op.ids = make([]string, 0, len(batch))
	op.paths = make([]AttemptPath, 0, len(batch))
	op.runs = make([]bool, 0, len(batch))
	var first map[string]bool
	if len(batch) > 1 {
		first = make(map[string]bool, len(batch))
	}
	for i, e := range batch {
		if first[e.EventID] {
			// One command cannot take one lease twice: the second is busy.
			op.d.States[i] = DeliveryBusy
			continue
		}
		if first != nil {
			first[e.EventID] = true
		}
		op.ids = append(op.ids, e.EventID)
		op.paths = append(op.paths, e.Path)
		op.runs = append(op.runs, e.Runs)
		if e.Runs {
			op.turns.add(e.EventID, e.Turns)
		}
	}
	return op
}

func (op *takeOp) queue(b *pgx.Batch, source string, replica *[16]byte) {
	if len(op.ids) == 0 {
		return
	}
	b.Queue(takeDeliveriesSQL, op.ids, op.paths, op.runs, source, [16]byte(op.d.Owner), leaseSeconds(op.processFor), replica)
	if len(op.turns.key) == 0 {
		b.Queue(recheckTakenSQL, source, op.ids, [16]byte(op.d.Owner))
		return
	}
	// The reread locks the keys of the new events' turns, so that the
	// statement that takes them reads the queue after their releases.
	b.Queue(recheckLockingSQL, source, op.ids, [16]byte(op.d.Owner), op.turns.eventID, op.turns.destination, op.turns.key)
	op.turns.queueTake(b, true, op.d.Owner, op.processFor, replica)
}

func (op *takeOp) read(br pgx.BatchResults) (err error) {
	if len(op.ids) == 0 {
		return nil
	}
	if op.first, err = collect(br, pgx.RowToStructByPos[takenState]); err != nil {
		return err
	}
	again, err := collect(br, pgx.RowToStructByPos[rechecked])
	if err != nil {
		return err
	}
	op.again = make(map[string]rechecked, len(again))
	for _, r := range again {
		op.again[r.EventID] = r
	}
	return op.turns.readTake(br)
}

func (op *takeOp) result() Deliveries {
	if len(op.ids) == 0 {
		return op.d
	}
	stateOf := make(map[string]DeliveryState, len(op.ids))
	interrupted := make(map[string]AttemptPath)
	for i, id := range op.ids {
		f := op.first[i]
		if again, ok := op.again[id]; ok && f.Taken {
			// Taken: what counts is the state read after the take, a
			// suspect's too (a beat that reaped the lease the take waited
			// for made it one after the take's snapshot).
			f.Processed, f.Queued = again.Processed, again.Queued
			if f.Interrupted == nil {
				f.Interrupted = again.Suspect
			}
		}
		switch {
		case f.Processed:
			stateOf[id] = DeliveryProcessed
		case f.Queued:
			stateOf[id] = DeliveryQueued
		case !f.Taken && !f.Grantable:
			stateOf[id] = DeliveryUngranted
		case !f.Taken:
			stateOf[id] = DeliveryBusy
		default:
			stateOf[id] = DeliveryNew
			if f.Interrupted != nil {
				interrupted[id] = AttemptPath(*f.Interrupted)
			}
		}
	}
	turnsOf := make(map[string][]OrderTurn, len(op.turns.turns))
	for _, t := range op.turns.turns {
		turnsOf[t.EventID] = append(turnsOf[t.EventID], t.turn(op.d.Owner))
	}
	for i, e := range op.batch {
		if op.d.States[i] == 0 {
			op.d.States[i] = stateOf[e.EventID]
			if op.d.States[i] == DeliveryNew {
				op.d.Interrupted[i] = interrupted[e.EventID]
				if ts := turnsOf[e.EventID]; len(ts) > 0 {
					if op.d.Turns == nil {
						op.d.Turns = make([][]OrderTurn, len(op.batch))
					}
					op.d.Turns[i] = ts
				}
			}
		}
	}
	return op.d
}

// markedSQL is true when the event whose id the SQL expression id gives
// has a dedup marker, and queuedSQL when it has a row of source on the retry
// queue: every read of an event's state is made of these two. Each is a
// lookup of one key, written as a scalar subquery rather than EXISTS:
// PostgreSQL may plan an EXISTS as one hashed read of the whole table, the
// cheapest way when the plan is made on an empty table, and a plan made
// once keeps it.
func markedSQL(id string) string {
	return `(SELECT true FROM processed_webhook_events m WHERE m.event_id = ` + id + `) IS NOT NULL`
}

func queuedSQL(source, id string) string {
	return `(SELECT true FROM webhook_events e WHERE e.source = ` + source + ` AND e.event_id = ` + id + `) IS NOT NULL`
}

// eventStatesSQL reads, for each event id $2 of source $1, with its place
// in $2 (ord), whether it has a dedup marker (processed) and whether it has
// a queue row (queued).
var eventStatesSQL = `-- hookd.event_states
		SELECT d.id, d.ord, ` + markedSQL("d.id") + ` AS processed, ` + queuedSQL("$1", "d.id") + ` AS queued
		FROM unnest($2::text[]) WITH ORDINALITY AS d(id, ord)`

// takeDeliveriesSQL reads, for each event id $1 of source $4, whether it
// has a dedup marker or a queue row, and takes the lease of each that has
// neither, for the path $2 and, where $3 says it runs at once, with its run
// started: owner $5, $6 seconds, replica $7. It returns, in the order of
// $1, what it read and whether it took the lease, with the path of a run
// the takeover cut short (the event becomes a suspect) or, for an event
// that is a suspect already, the path of the run that made it one. An
// event processed or queued is never written to, so its redelivery costs a
// read.
var takeDeliveriesSQL = `-- hookd.take
	WITH g AS MATERIALIZED (
		SELECT ` + grantableSQL("$7") + ` AS ok
	), d AS MATERIALIZED (
		SELECT d.id, d.path, d.runs, d.ord, ` + markedSQL("d.id") + ` AS processed, ` + queuedSQL("$4", "d.id") + ` AS queued
		FROM unnest($1::text[], $2::text[], $3::bool[]) WITH ORDINALITY AS d(id, path, runs, ord)
	), taken AS (` + insertLeasesSQL(`
		SELECT d.id, $5::uuid, d.path, now() + make_interval(secs => $6), $7::uuid, CASE WHEN d.runs THEN now() END
		FROM d
		WHERE NOT d.processed AND NOT d.queued AND (SELECT ok FROM g)
		ORDER BY d.id`) + `
	), suspected AS (` + suspectedSQL("taken") + `
	)
	SELECT d.processed, d.queued, t.event_id IS NOT NULL,
	       CASE WHEN t.cut_short THEN t.interrupted
	            ELSE (SELECT s.path FROM webhook_suspects s WHERE s.event_id = t.event_id AND s.cleared_at IS NULL) END,
	       (SELECT ok FROM g)
	FROM d LEFT JOIN taken t ON t.event_id = d.id
	ORDER BY d.ord`

// recheckTakenSQL reads again, in a statement of its own and so after
// whatever the previous holders committed with their release, whether each
// event of source $1 among $2 that owner $3 just leased has a marker or a
// queue row, and gives back the lease of each that has: only new events
// stay leased. It returns each leased event's id and what it read, with
// the path that made it a suspect if it is one.
var recheckTakenSQL = recheckTaken("-- hookd.recheck_taken", "")

// recheckLockingSQL is recheckTakenSQL that also makes and locks the
// lease rows of the keys $5 of destinations $4 of the new events among
// $3's turns (lockOrderKeysSQL).
var recheckLockingSQL = recheckTaken("-- hookd.recheck_locking", `
	), locked AS (`+lockOrderKeys(`
		SELECT t.destination, t.order_key FROM unnest($4::text[], $5::text[], $6::text[]) AS t(event_id, destination, order_key)
		WHERE t.event_id IN (SELECT event_id FROM h WHERE NOT processed AND NOT queued)`))

func recheckTaken(name, more string) string {
	return name + `
	WITH h AS MATERIALIZED (
		SELECT l.event_id, ` + markedSQL("l.event_id") + ` AS processed, ` + queuedSQL("$1", "l.event_id") + ` AS queued,
		       (SELECT s.path FROM webhook_suspects s WHERE s.event_id = l.event_id AND s.cleared_at IS NULL) AS suspect
		FROM webhook_leases l
		WHERE l.event_id = ANY ($2::text[]) AND l.owner = $3
	), handled AS (
		DELETE FROM webhook_leases l
		WHERE l.event_id = ANY (ARRAY(SELECT event_id FROM h WHERE processed OR queued)) AND l.owner = $3` + more + `
	)
	SELECT event_id, processed, queued, suspect FROM h`
}

// Received is the outcome of one leased delivery, as SettleDeliveries
// writes it.
type Received struct {
	EventID string
	// Owner is the token of the lease the delivery holds.
	Owner uuid.UUID
	// Queue, when set, puts the event on the retry queue, due after Wait;
	// otherwise the event was processed and gets its dedup marker.
	Queue *FailedEvent
	Wait  time.Duration
	// Attempt, when set, is recorded in the event's history. An event
	// processed on its first delivery records none: a marker without
	// attempts means just that.
	Attempt *NewAttempt
	// Suspect, when set, is the path of the run that made the event a
	// suspect (its lease was taken over from a run that never reported):
	// each delivery of a fan-out queued here is a suspect too, under its
	// own key, so that each runs alone.
	Suspect AttemptPath
	// RouteMisses are the destinations whose filters failed on the event,
	// recorded with the outcome (RouteMisses).
	RouteMisses []RouteMiss
	// Fanout is the outcome of an event routed to several destinations,
	// in place of Queue and Attempt: a queue row for each delivery that
	// failed or waits, and an attempt for each call, successes included,
	// so that the event's page says which destination got it when. The
	// event gets its marker only when no delivery is queued.
	Fanout *Fanout
	// Seen, when set, moves its endpoint's (and account's) last event in
	// endpoint_activity to now. The receiver sets it on the first outcome
	// of each endpoint and account in a while, not on every one.
	Seen *Seen
	// Pair, when set, links a thin event to the snapshot event it mirrors.
	Pair *Pair
	// Log, when set on a processed outcome, is what the event log keeps of
	// the event: its marker is written with it. The receiver sets it on
	// every processed outcome; a queued one's queue row is its entry.
	Log *LoggedEvent
	// Called says the outcome is that of a call hookd tried to send to the
	// app: only such outcomes count for the circuit breaker (WithBreaker).
	// A discarded test-mode event, an event deferred or held, a run the
	// fence cut short: none says whether the app is up.
	Called bool
}

// Fanout is what one run of an event's deliveries to several destinations
// left to write.
type Fanout struct {
	// Queue holds the deliveries that go on the retry queue, each naming
	// its destination.
	Queue []FailedEvent
	// Attempts holds the calls made, each naming its destination.
	Attempts []NewAttempt
	// Turns holds the turns the deliveries to ordered destinations took
	// (TakeOrderTurn), given back with the outcome.
	Turns []OrderTurn
}

// queued is every queue row r writes.
func (r Received) queued() []FailedEvent {
	switch {
	case r.Fanout != nil:
		return r.Fanout.Queue
	case r.Queue != nil:
		return []FailedEvent{*r.Queue}
	}
	return nil
}

// attempts is every attempt r records.
func (r Received) attempts() []NewAttempt {
	switch {
	case r.Fanout != nil:
		return r.Fanout.Attempts
	case r.Attempt != nil:
		return []NewAttempt{*r.Attempt}
	}
	return nil
}

// settleOp is the settling part of Exchange's short transaction.
type settleOp struct {
	// log is the markers' event log columns, whose buffer goes back to
	// its pool once the statement has been sent.
	log      logColumns
	eventID  []string
	owner    []uuid.UUID
	queued   []bool
	sql      string
	args     []any
	released []leaseKey
	tally    breakerTally
	// destTally counts a fan-out's calls by destination.
	destTally destinationTallies
	// seen and pairs are written by statements of their own in the same
	// transaction, only when some outcome has one.
	seen     activityColumns
	pairs    pairColumns
	misses   routeMissColumns
	suspects suspectColumns
	turns    orderTurnColumns
}

func newSettleOp(rs []Received) *settleOp {
	op := &settleOp{}
	if len(rs) == 0 {
		return op
	}
	var q queuedColumns
	var a attemptColumns
	l := &op.log
	l.grow(len(rs))
	op.eventID, op.owner, op.queued = make([]string, 0, len(rs)), make([]uuid.UUID, 0, len(rs)), make([]bool, 0, len(rs))
	for _, r := range rs {
		op.eventID = append(op.eventID, r.EventID)
		op.owner = append(op.owner, r.Owner)
		queued, attempts := r.queued(), r.attempts()
		op.queued = append(op.queued, len(queued) > 0)
		for _, fe := range queued {
			q.add(fe, r.Owner, r.Wait, called(attempts, fe.Destination))
		}
		for _, at := range attempts {
			a.add(at, r.Owner)
		}
		if r.Fanout != nil {
			for _, at := range r.Fanout.Attempts {
				op.destTally.add(at.Destination, &at, at.Succeeded)
			}
			for _, t := range r.Fanout.Turns {
				op.turns.add(t)
			}
		}
		if r.Called {
			op.tally.add(r.Attempt, r.Queue == nil)
		}
		if r.Seen != nil {
			op.seen.add(*r.Seen)
		}
		if r.Pair != nil {
			op.pairs.add(*r.Pair)
		}
		op.misses.add(r.EventID, r.RouteMisses)
		if r.Suspect != "" {
			for _, fe := range queued {
				if key := DeliveryKey(r.EventID, fe.Destination); key != r.EventID {
					op.suspects.add(key, r.Suspect)
				}
			}
		}
		l.add(r.Log)
	}
	if len(q.eventID)+len(a.eventID) == 0 {
		// Every event was processed on its first delivery, as nearly all
		// are: the statement that writes only markers is much the cheaper.
		op.sql, op.args = settleProcessedSQL, append([]any{op.eventID, uuidArray(op.owner)}, l.args()...)
		return op
	}
	// While a destination fails every call, every event of a group goes
	// on the queue, and none writes a marker.
	markers, turns := slices.Contains(op.queued, false), op.turns.any()
	op.sql = settleStatement(markers, turns)
	op.args = []any{op.eventID, uuidArray(op.owner)}
	if markers {
		op.args = append(op.args, op.queued)
	}
	op.args = append(op.args, q.args()...)
	op.args = append(op.args, a.args()...)
	if markers {
		op.args = append(op.args, l.args()...)
	}
	if turns {
		op.args = append(op.args, op.turns.args()...)
		op.turns = orderTurnColumns{}
	}
	return op
}

// settleStatement is the settle's statement that writes markers or not,
// and gives back turns or not.
func settleStatement(markers, turns bool) string {
	switch {
	case markers && turns:
		return settleTurnsSQL
	case markers:
		return settleDeliveriesSQL
	case turns:
		return settleQueuedTurnsSQL
	}
	return settleQueuedSQL
}

// called says whether attempts holds a call to destination.
func called(attempts []NewAttempt, destination string) bool {
	for _, a := range attempts {
		if cmp.Or(a.Destination, DefaultDestination) == cmp.Or(destination, DefaultDestination) {
			return true
		}
	}
	return false
}

func (op *settleOp) queue(b *pgx.Batch) {
	if len(op.eventID) > 0 {
		b.Queue(op.sql, op.args...)
		op.seen.queue(b)
		op.pairs.queue(b)
		op.misses.queue(b)
		op.suspects.queue(b)
		op.turns.queue(b)
	}
}

func (op *settleOp) read(br pgx.BatchResults) (err error) {
	if len(op.eventID) == 0 {
		return nil
	}
	if op.released, err = collect(br, pgx.RowToStructByPos[leaseKey]); err != nil {
		return err
	}
	if err := op.seen.read(br); err != nil {
		return err
	}
	if err := op.pairs.read(br); err != nil {
		return err
	}
	if err := op.misses.read(br); err != nil {
		return err
	}
	if err := op.suspects.read(br); err != nil {
		return err
	}
	return op.turns.read(br)
}

func (op *settleOp) written() []bool { return written(op.released, op.eventID, op.owner) }

// leaseKey is a lease as an outcome names it.
type leaseKey struct {
	EventID string
	Owner   [16]byte
}

// uuidArray is us as pgx encodes a uuid[] in binary: uuid.UUID's own
// encoding goes through its text form, element by element, which a profile
// of the receiver showed costing more than the rest of its arguments.
func uuidArray(us []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(us))
	for i, u := range us {
		out[i] = u
	}
	return out
}

// written says, for each of the outcomes of eventIDs and owners, whether
// its lease is among those released.
func written(released []leaseKey, eventIDs []string, owners []uuid.UUID) []bool {
	ok := make(map[leaseKey]bool, len(released))
	for _, k := range released {
		ok[k] = true
	}
	out := make([]bool, len(eventIDs))
	for i := range eventIDs {
		out[i] = ok[leaseKey{eventIDs[i], [16]byte(owners[i])}]
	}
	return out
}

// settleDeliveriesSQL releases the leases ($1 event ids, $2 owners; $3
// whether each event goes on the queue) and writes the outcome of each one
// it released: the marker with its event log columns (after the attempts,
// as logColumns orders them, beside $1-$3), or the queue rows, one per
// delivery ($4-$26, as queuedColumns orders them); and the attempts ($27
// on, as attemptColumns orders them). It returns the leases it released.
var settleDeliveriesSQL = settleDeliveries("-- hookd.settle", true, false)

// settleQueuedSQL is settleDeliveriesSQL for outcomes that all go on the
// queue, as every event does while one of its destinations fails each
// call: without a marker to write it takes neither $3 nor the log columns,
// and the executor sets up no insert into the markers and their indexes.
// The queue rows are $3-$25, the attempts from $26 on.
var settleQueuedSQL = settleDeliveries("-- hookd.settle_queued", false, false)

// settleTurnsSQL and settleQueuedTurnsSQL are settleDeliveriesSQL and
// settleQueuedSQL that give back, in the same statement, the turns of the
// deliveries to ordered destinations (orderTurnColumns, after the rest).
var (
	settleTurnsSQL       = settleDeliveries("-- hookd.settle_turns", true, true)
	settleQueuedTurnsSQL = settleDeliveries("-- hookd.settle_queued_turns", false, true)
)

// settleDeliveries is the statement of settleDeliveriesSQL named name,
// with the markers' insert or without (markers), and with the turns' give
// back (turns).
func settleDeliveries(name string, markers, turns bool) string {
	queued := 3 // the queue rows' first parameter
	if markers {
		queued = 4
	}
	attempts := queued + len(queuedTypes)
	next := attempts + attemptArgs
	var marked, gaveBack string
	if markers {
		marked = `
	), marked AS (` + insertMarkersSQL(`
		FROM unnest($1::text[], $2::uuid[], $3::bool[], `+logUnnestSQL(next)+`)
		     AS l(event_id, owner, queued, `+logNamesSQL+`)
		JOIN released r ON r.event_id = l.event_id AND r.owner = l.owner
		WHERE NOT l.queued`)
		next += logArgs
	}
	if turns {
		gaveBack = `
	), gave_back AS (` + giveBackOrderTurns(next) + `
	`
	}
	return name + `
	WITH released AS (` + releaseLeasesSQL("$1", "$2") + marked + `
	), enqueued AS (
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, last_attempt_at, next_retry_at,
		                            status, dead_alerted_at, ` + metaColumns + `, stripe_created, trace_parent, destination,
		                            order_key, order_seq)
		SELECT e.source, e.event_id, e.event_type, e.payload, NULLIF(e.signature, ''), e.error,
		       CASE WHEN e.attempted THEN now() END, now() + make_interval(secs => e.wait),
		       CASE WHEN e.held THEN 'dead' ELSE 'failed' END, CASE WHEN e.held THEN now() END,
		       e.endpoint, e.livemode, NULLIF(e.account, ''), NULLIF(e.api_version, ''), NULLIF(e.object_id, ''),
		       NULLIF(e.object_type, ''), NULLIF(e.customer, ''), NULLIF(e.snapshot_event, ''), e.created,
		       NULLIF(e.trace_parent, ''), e.destination, NULLIF(e.order_key, ''),
		       CASE WHEN e.order_key <> '' THEN coalesce(NULLIF(e.order_seq, 0), nextval('webhook_order_seq')) END
		FROM unnest(` + typedParams(queued, queuedTypes[:]) + `)
		     AS e(source, event_id, owner, event_type, payload, signature, error, wait, attempted,
		          held, endpoint, livemode, account, api_version, object_id, object_type, customer, snapshot_event, created,
		          trace_parent, destination, order_key, order_seq)
		JOIN released r ON r.event_id = e.event_id AND r.owner = e.owner
		ON CONFLICT (source, event_id, destination) DO NOTHING
	), recorded AS (` + givenAttemptsSQL(attempts, "released") + gaveBack + `
	)
	SELECT event_id, owner FROM released`
}

// queuedTypes are queuedColumns' arrays' element types, in the order of
// its args.
var queuedTypes = [...]string{"text", "text", "uuid", "text", "text", "text", "text", "float8", "bool", "bool", "text", "bool",
	"text", "text", "text", "text", "text", "text", "timestamptz", "text", "text", "text", "int8"}

// typedParams is the parameters from $first on, one of each of types, each
// cast to an array of its type: an unnest's arguments.
func typedParams(first int, types []string) string {
	p := make([]string, len(types))
	for i, t := range types {
		p[i] = "$" + strconv.Itoa(first+i) + "::" + t + "[]"
	}
	return strings.Join(p, ", ")
}

// settleProcessedSQL is settleDeliveriesSQL for outcomes that are all
// markers without attempts: it releases the leases ($1 event ids, $2
// owners) and writes the marker, with its event log columns ($3-$13), of
// each one it released.
var settleProcessedSQL = `-- hookd.settle_processed
	WITH released AS (` + releaseLeasesSQL("$1", "$2") + `
	), marked AS (` + insertMarkersSQL(`
		FROM unnest($1::text[], $2::uuid[], `+logUnnestSQL(3)+`) AS l(event_id, owner, `+logNamesSQL+`)
		JOIN released r ON r.event_id = l.event_id AND r.owner = l.owner`) + `
	)
	SELECT event_id, owner FROM released`

// queuedColumns holds events for the retry queue, column by column.
type queuedColumns struct {
	source, eventID, eventType, payload, signature, errors []string
	owner                                                  []uuid.UUID
	wait                                                   []float64
	attempted, held                                        []bool
	endpoint, account, apiVersion, objectID, objectType    []string
	customer, snapshotEvent, traceParent, destination      []string
	orderKey                                               []string
	orderSeq                                               []int64
	// livemode is NULL where the event did not say.
	livemode []*bool
	created  []*time.Time
}

func (c *queuedColumns) add(e FailedEvent, owner uuid.UUID, wait time.Duration, attempted bool) {
	c.source = append(c.source, e.Source)
	c.eventID = append(c.eventID, e.EventID)
	c.owner = append(c.owner, owner)
	c.eventType = append(c.eventType, e.EventType)
	c.payload = append(c.payload, string(e.Payload))
	c.signature = append(c.signature, e.Signature)
	c.errors = append(c.errors, e.Error)
	if e.InTurn {
		wait = 0
	}
	c.wait = append(c.wait, wait.Seconds())
	c.attempted = append(c.attempted, attempted)
	c.held = append(c.held, e.Held)
	m := e.Meta
	c.endpoint = append(c.endpoint, cmp.Or(m.Endpoint, DefaultEndpoint))
	c.livemode = append(c.livemode, m.Livemode)
	c.account = append(c.account, deref(m.Account))
	c.apiVersion = append(c.apiVersion, deref(m.APIVersion))
	c.objectID = append(c.objectID, deref(m.ObjectID))
	c.objectType = append(c.objectType, deref(m.ObjectType))
	c.customer = append(c.customer, deref(m.Customer))
	c.snapshotEvent = append(c.snapshotEvent, deref(m.SnapshotEvent))
	c.created = append(c.created, e.Created)
	c.traceParent = append(c.traceParent, e.TraceParent)
	c.destination = append(c.destination, cmp.Or(e.Destination, DefaultDestination))
	c.orderKey = append(c.orderKey, e.OrderKey)
	c.orderSeq = append(c.orderSeq, e.OrderSeq)
}

func (c *queuedColumns) args() []any {
	return []any{nonNil(c.source), nonNil(c.eventID), uuidArray(c.owner), nonNil(c.eventType), nonNil(c.payload),
		nonNil(c.signature), nonNil(c.errors), nonNil(c.wait), nonNil(c.attempted),
		nonNil(c.held), nonNil(c.endpoint), nonNil(c.livemode), nonNil(c.account), nonNil(c.apiVersion),
		nonNil(c.objectID), nonNil(c.objectType), nonNil(c.customer), nonNil(c.snapshotEvent), nonNil(c.created),
		nonNil(c.traceParent), nonNil(c.destination), nonNil(c.orderKey), nonNil(c.orderSeq)}
}
