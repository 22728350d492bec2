package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// A destination with order_by gets the deliveries of one key one at a time,
// in the order hookd accepted them (migration 00040). Its deliveries' queue
// rows carry the key and their place (order_seq). Inline, a delivery takes
// its turn (TakeOrderTurn) before it is called: the key's lease in
// webhook_order_leases, held through the call, when the key has no row on
// the queue and no call in flight; otherwise it is queued behind them. The
// retry loop claims a key's head only, the row of the smallest order_seq,
// when no inline call holds the key (ClaimOrderedDeliveries): the head's
// queue row, on which its own lease is, keeps the rest of the key waiting
// until its success deletes it. A dead head holds its key until it is
// retried or a person releases it (ReleaseHeldKey).

// OrderTurn is a delivery's turn under its destination's order_by.
type OrderTurn struct {
	Destination, Key string
	// Owner is the token the key's lease is taken with.
	Owner uuid.UUID
	// Granted: the key's lease is Owner's, as nothing of the key is on
	// the queue or in flight: the delivery may be called now. Otherwise
	// it goes on the queue behind them, counted as the key's waiter until
	// its row is written.
	Granted bool
	// Seq is the delivery's place in its key's order.
	Seq int64
}

// OrderKey is a delivery's destination and key under its order_by.
type OrderKey struct{ Destination, Key string }

// TakeOrderTurn takes the turn of a delivery of key to destination for a
// call of at most holdFor: the key's lease, when nothing of the key is on
// the queue or in flight, and its place in the key's order either way.
// Give the turn back with the delivery's outcome (Fanout.Turns), in the
// transaction that writes its queue row, if any, or with
// GiveBackOrderTurns. The receiver takes its turns with the event's lease
// instead (Delivery.Turns).
func (s *Store) TakeOrderTurn(ctx context.Context, destination, key string, holdFor time.Duration) (OrderTurn, error) {
	var op orderTakeOp
	op.add("", []OrderKey{{destination, key}})
	owner := uuid.New()
	err := s.shortTx(ctx, func(b *pgx.Batch) {
		op.queue(b, false, owner, holdFor, s.replica.arg())
	}, op.read)
	if err != nil || len(op.turns) != 1 {
		return OrderTurn{}, fmt.Errorf("take the turn of %s's key %q: %w", destination, key, cmp.Or(err, errNoTurn))
	}
	return op.turns[0].turn(owner), nil
}

var errNoTurn = errors.New("no turn read")

// orderTakeOp takes the turns of a batch's deliveries: the key rows are
// made and locked, in key order, by a statement of their own, so that the
// statement that decides reads the queue after whatever each lease's last
// holder committed with its release: a failed call's row, written with
// the release, is seen, and its delivery stays ahead.
type orderTakeOp struct {
	eventID, destination, key []string
	turns                     []takenTurn
}

// takenTurn is a row takeOrderTurnsSQL returns.
type takenTurn struct {
	EventID, Destination, Key string
	Granted                   bool
	Seq                       int64
}

func (t takenTurn) turn(owner uuid.UUID) OrderTurn {
	return OrderTurn{Destination: t.Destination, Key: t.Key, Owner: owner, Granted: t.Granted, Seq: t.Seq}
}

func (op *orderTakeOp) add(eventID string, keys []OrderKey) {
	for _, k := range keys {
		op.eventID = append(op.eventID, eventID)
		op.destination = append(op.destination, k.Destination)
		op.key = append(op.key, k.Key)
	}
}

// queue takes the turns for owner, holdFor, replica; with leased, only
// those of the events whose leases owner holds (the ones the batch took
// and found new).
func (op *orderTakeOp) queue(b *pgx.Batch, leased bool, owner uuid.UUID, holdFor time.Duration, replica *[16]byte) {
	if len(op.key) == 0 {
		return
	}
	b.Queue(lockOrderKeysSQL, op.eventID, op.destination, op.key, [16]byte(owner), leased)
	op.queueTake(b, leased, owner, holdFor, replica)
}

// queueTake is queue's second statement alone, for a batch whose keys a
// statement before locked (recheckLockingSQL).
func (op *orderTakeOp) queueTake(b *pgx.Batch, leased bool, owner uuid.UUID, holdFor time.Duration, replica *[16]byte) {
	b.Queue(takeOrderTurnsSQL, op.eventID, op.destination, op.key, [16]byte(owner), leaseSeconds(holdFor), replica, leased)
}

func (op *orderTakeOp) read(br pgx.BatchResults) (err error) {
	if len(op.key) == 0 {
		return nil
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	return op.readTake(br)
}

func (op *orderTakeOp) readTake(br pgx.BatchResults) (err error) {
	if len(op.key) == 0 {
		return nil
	}
	op.turns, err = collect(br, pgx.RowToStructByPos[takenTurn])
	return err
}

// orderTurnsSQL is the part both statements share: the turns asked for,
// events $1 to destinations $2 under keys $3, in order; with the
// parameter leased, only those of events whose leases owner $4 holds.
func orderTurnsSQL(leased string) string {
	return `
		SELECT t.* FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(event_id, destination, order_key, ord)
		WHERE NOT ` + leased + `::bool OR EXISTS (SELECT 1 FROM webhook_leases x WHERE x.event_id = t.event_id AND x.owner = $4::uuid)`
}

// lockOrderKeysSQL makes the lease rows of the turns' keys and locks them:
// ON CONFLICT DO UPDATE locks a row it finds even where its WHERE keeps
// it from updating it, so a row that exists is locked without a new
// version of it.
var lockOrderKeysSQL = `-- hookd.order_lock` + lockOrderKeys(`
		SELECT t.destination, t.order_key FROM (`+orderTurnsSQL("$5")+`) t`)

// lockOrderKeys is the statement of lockOrderKeysSQL for the keys rows
// gives (destination, order_key).
func lockOrderKeys(rows string) string {
	return `
	INSERT INTO webhook_order_leases AS l (destination, order_key)
	SELECT DISTINCT k.destination, k.order_key FROM (` + rows + `) k
	ORDER BY 1, 2
	ON CONFLICT (destination, order_key) DO UPDATE SET destination = l.destination WHERE false`
}

// takeOrderTurnsSQL gives each key's first turn the key's lease, for
// owner $4, $5 seconds, replica $6 ($7 is orderTurnsSQL's leased), when it is not live, no waiter
// counts, and the key has no queue row; every other turn is counted as a
// waiter. It returns each turn, in order, with whether it got the lease,
// and its place in the key's order.
var takeOrderTurnsSQL = `-- hookd.order_take
	WITH t AS MATERIALIZED (
		SELECT t.*, row_number() OVER (PARTITION BY t.destination, t.order_key ORDER BY t.ord) AS nth
		FROM (` + orderTurnsSQL("$7") + `) t
	), k AS MATERIALIZED (
		SELECT l.destination, l.order_key,
		       NOT ` + liveLeaseSQL("l") + ` AND (l.waiters = 0 OR l.waiting_until <= now()) AND ` + grantableSQL("$6") + `
		       AND (SELECT true FROM webhook_events e
		            WHERE e.destination = l.destination AND e.order_key = l.order_key LIMIT 1) IS NULL AS free
		FROM webhook_order_leases l
		WHERE (l.destination, l.order_key) IN (SELECT destination, order_key FROM t)
	), turns AS MATERIALIZED (
		SELECT s.*, nextval('webhook_order_seq') AS seq
		FROM (SELECT t.event_id, t.destination, t.order_key, t.ord, k.free AND t.nth = 1 AS granted
		      FROM t JOIN k USING (destination, order_key)
		      ORDER BY t.ord) s
	), taken AS (
		UPDATE webhook_order_leases l
		SET owner = CASE WHEN g.granted THEN $4::uuid ELSE l.owner END,
		    replica = CASE WHEN g.granted THEN $6::uuid ELSE l.replica END,
		    expires_at = CASE WHEN g.granted THEN now() + make_interval(secs => $5) ELSE l.expires_at END,
		    waiters = CASE WHEN g.granted OR l.waiting_until <= now() THEN 0 ELSE l.waiters END + g.waiting,
		    waiting_until = CASE WHEN g.waiting > 0 THEN greatest(l.waiting_until, now() + make_interval(secs => $5))
		                         ELSE l.waiting_until END
		FROM (SELECT destination, order_key, bool_or(granted) AS granted, count(*) FILTER (WHERE NOT granted) AS waiting
		      FROM turns GROUP BY 1, 2) g
		WHERE l.destination = g.destination AND l.order_key = g.order_key
	)
	SELECT event_id, destination, order_key, granted, seq FROM turns ORDER BY ord`

// orderTurnColumns are the turns an outcome gives back, one row per key:
// its lease's owner, when the outcome held it, and how many of its
// waiters the outcome's queue rows are.
type orderTurnColumns struct {
	destination, key []string
	owner            [][16]byte
	waited           []int32
	at               map[[2]string]int
}

func (c *orderTurnColumns) add(t OrderTurn) {
	k := [2]string{t.Destination, t.Key}
	i, ok := c.at[k]
	if !ok {
		if c.at == nil {
			c.at = map[[2]string]int{}
		}
		i = len(c.destination)
		c.at[k] = i
		c.destination, c.key = append(c.destination, t.Destination), append(c.key, t.Key)
		c.owner, c.waited = append(c.owner, [16]byte{}), append(c.waited, 0)
	}
	if t.Granted {
		c.owner[i] = t.Owner
	} else {
		c.waited[i]++
	}
}

func (c *orderTurnColumns) any() bool { return len(c.destination) > 0 }

func (c *orderTurnColumns) args() []any { return []any{c.destination, c.key, c.owner, c.waited} }

func (c *orderTurnColumns) queue(b *pgx.Batch) {
	if len(c.destination) > 0 {
		b.Queue(giveBackOrderTurnsSQL, c.args()...)
	}
}

func (c *orderTurnColumns) read(br pgx.BatchResults) error {
	if len(c.destination) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// GiveBackOrderTurns gives back turns whose deliveries wrote nothing to
// the queue (a replay's calls): the leases the granted ones hold, and the
// waiters the others counted.
func (s *Store) GiveBackOrderTurns(ctx context.Context, turns []OrderTurn) error {
	var c orderTurnColumns
	for _, t := range turns {
		c.add(t)
	}
	if len(c.destination) == 0 {
		return nil
	}
	if _, err := s.db.Exec(ctx, giveBackOrderTurnsSQL, c.destination, c.key, c.owner, c.waited); err != nil {
		return fmt.Errorf("give back order turns: %w", err)
	}
	return nil
}

// giveBackOrderTurnsSQL releases the leases of keys $2 of destinations $1
// still held by owners $3, and takes waiters $4 off their count. The
// rows are taken in key order, so that two give-backs never deadlock.
var giveBackOrderTurnsSQL = `-- hookd.order_give_back` + giveBackOrderTurns(1)

// giveBackOrderTurns is the statement of giveBackOrderTurnsSQL, its
// parameters from $first on.
func giveBackOrderTurns(first int) string {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	return `
	UPDATE webhook_order_leases l
	SET owner = CASE WHEN l.owner = r.owner THEN NULL ELSE l.owner END,
	    expires_at = CASE WHEN l.owner = r.owner THEN '-infinity' ELSE l.expires_at END,
	    waiters = greatest(l.waiters - r.waited, 0)
	FROM (SELECT * FROM unnest(` + p(0) + `::text[], ` + p(1) + `::text[], ` + p(2) + `::uuid[], ` + p(3) + `::int[])
	           AS r(destination, order_key, owner, waited)
	      ORDER BY 1, 2) r
	WHERE l.destination = r.destination AND l.order_key = r.order_key`
}

// ClaimOrderedDeliveries is ClaimDeliveries for a destination with
// order_by: of a key, only its head, the row of the smallest order_seq, is
// claimed, and only while nothing else of the key is in flight. A head not
// due (waiting out its backoff) or dead holds the rest of its key.
// Deliveries without a key are claimed as ClaimDeliveries claims them.
//
// The head's own lease is what keeps the rest of its key waiting while
// it is in flight: the next row of the key becomes the head only once the
// head's success deletes it, and the inline path refuses a key that has a
// queue row. The key's lease in webhook_order_leases is not taken: the
// claim only checks, under a share lock held for its short transaction,
// that no inline call holds the key and no waiter counts on it (a waiter's
// row, not yet written, may come before the head). A key another
// transaction is writing is skipped.
func (s *Store) ClaimOrderedDeliveries(ctx context.Context, destination string, n int, processFor time.Duration) (Attempts, error) {
	return s.claimOrdered(ctx, orderHeadsAndKeylessSQL, destination, n, processFor)
}

// ClaimOrderedHeads is ClaimOrderedDeliveries without the deliveries that
// have no key: for a loop that found none due a moment ago. Finding them
// reads every due delivery of the destination, which under a backlog of
// keyed ones is as much work as the claim.
func (s *Store) ClaimOrderedHeads(ctx context.Context, destination string, n int, processFor time.Duration) (Attempts, error) {
	return s.claimOrdered(ctx, orderHeadsSQL, destination, n, processFor)
}

// claimOrdered claims what heads, orderHeadsSQL or
// orderHeadsAndKeylessSQL, reads.
func (s *Store) claimOrdered(ctx context.Context, heads string, destination string, n int, processFor time.Duration) (Attempts, error) {
	owner := uuid.New()
	a := Attempts{Deadline: time.Now().Add(processFor)}
	rows, err := s.db.Query(ctx, heads, destination, n, MaxAttempts)
	if err != nil {
		return Attempts{}, fmt.Errorf("claim ordered deliveries: %w", err)
	}
	keys := []string{}
	var ids [][16]byte
	var id [16]byte
	var key *string
	if _, err := pgx.ForEachRow(rows, []any{&id, &key}, func() error {
		ids = append(ids, id)
		if key != nil {
			keys = append(keys, *key)
		}
		return nil
	}); err != nil {
		return Attempts{}, fmt.Errorf("claim ordered deliveries: %w", err)
	}
	if len(ids) == 0 {
		return a, nil
	}
	secs := leaseSeconds(processFor)
	err = s.shortTx(ctx, func(b *pgx.Batch) {
		if len(keys) > 0 {
			b.Queue(makeOrderKeysSQL, destination, keys)
		}
		b.Queue(claimOrderedSQL, n, [16]byte(owner), secs, MaxAttempts, SuspectError, s.replica.arg(), destination, ids, keys)
	}, func(br pgx.BatchResults) error {
		if len(keys) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		a.Claimed, err = collectClaimed(rows, owner)
		return err
	})
	if err != nil {
		return Attempts{}, fmt.Errorf("claim ordered deliveries: %w", err)
	}
	return a, nil
}

// orderHeadSQL is true for the webhook_events row e that is the head of
// its key: no row of its destination and key comes before it, dead or
// pending.
const orderHeadSQL = `(SELECT true FROM webhook_events p
		WHERE p.destination = e.destination AND p.order_key = e.order_key AND p.order_seq < e.order_seq LIMIT 1) IS NULL`

// orderHeadsSQL reads the heads of destination $1's keys that are due, up
// to $2 of them, the longest due first, with their keys; $3 is
// MaxAttempts. It goes from key to key down webhook_events_order_idx,
// whose first row of a key is its head: each step reads the next key's
// head alone, so that a key's many rows behind its head cost nothing, as
// they would in order of due time.
const orderHeadsSQL = `-- hookd.order_heads` + orderHeadsWalk

// orderHeadsAndKeylessSQL is orderHeadsSQL, then up to $2 due deliveries
// without a key.
const orderHeadsAndKeylessSQL = `-- hookd.order_heads_keyless` + orderHeadsWalk + `
	UNION ALL
	(SELECT e.id, NULL FROM webhook_events e
	 WHERE e.` + pending + ` AND e.destination = $1 AND e.order_key IS NULL AND e.next_retry_at <= now()
	   AND (e.attempts < $3 OR e.claims > 0)
	 ORDER BY e.next_retry_at
	 LIMIT $2)`

// orderHeadsWalk is the walk down the keys both heads queries share,
// with its own ORDER BY and LIMIT in parentheses so that a UNION ALL may
// follow it.
const orderHeadsWalk = `
	WITH RECURSIVE h AS (
		(SELECT e.id, e.order_key, e.status, e.next_retry_at, e.attempts, e.claims FROM webhook_events e
		 WHERE e.destination = $1 AND e.order_key IS NOT NULL ORDER BY e.order_key, e.order_seq LIMIT 1)
		UNION ALL
		SELECT n.* FROM h CROSS JOIN LATERAL (
			SELECT e.id, e.order_key, e.status, e.next_retry_at, e.attempts, e.claims FROM webhook_events e
			WHERE e.destination = $1 AND e.order_key IS NOT NULL AND e.order_key > h.order_key
			ORDER BY e.order_key, e.order_seq LIMIT 1) n
	)
	(SELECT h.id, h.order_key FROM h
	 WHERE h.` + pending + ` AND h.next_retry_at <= now() AND (h.attempts < $3 OR h.claims > 0)
	 ORDER BY h.next_retry_at
	 LIMIT $2)`

// makeOrderKeysSQL makes the lease rows of keys $2 of destination $1 that
// have none. The rows that exist are left out before the insert, which
// would otherwise wait on each one another transaction is writing.
const makeOrderKeysSQL = `-- hookd.order_make
	INSERT INTO webhook_order_leases (destination, order_key)
	SELECT $1, k FROM unnest($2::text[]) AS k
	WHERE NOT EXISTS (SELECT 1 FROM webhook_order_leases l WHERE l.destination = $1 AND l.order_key = k)
	ORDER BY k
	ON CONFLICT (destination, order_key) DO NOTHING`

// claimOrderedSQL is claimAttemptsSQL of the deliveries $8 (read by
// orderHeadsSQL or orderHeadsAndKeylessSQL): those without a key, and the
// heads of keys $9 that are free, each still its key's head as this
// statement reads the queue. A key is free when no inline call holds its
// lease and no waiter counts on it; its row is share-locked until the
// claim commits, so that no turn is granted or counted on it meanwhile,
// and a row another transaction is writing is skipped.
var claimOrderedSQL = claimSQL("-- hookd.claim_ordered", `
		  AND id = ANY ($8::uuid[])
		  AND (order_key IS NULL OR (
		       order_key IN (SELECT o.order_key FROM webhook_order_leases o
		                     WHERE o.destination = $7 AND o.order_key = ANY ($9::text[])
		                       AND NOT `+liveLeaseSQL("o")+` AND (o.waiters = 0 OR o.waiting_until <= now())
		                     FOR SHARE SKIP LOCKED)
		       AND `+strings.ReplaceAll(orderHeadSQL, "e.", "webhook_events.")+`))`)

// HeldKey is a key of an ordered destination held by a dead event: the
// key's later deliveries wait until a person retries the event or
// releases the key.
type HeldKey struct {
	Destination string    `db:"destination"`
	Key         string    `db:"order_key"`
	EventID     string    `db:"event_id"`
	DeadSince   time.Time `db:"dead_since"`
	// Waiting is how many deliveries of the key wait behind it.
	Waiting int `db:"waiting"`
}

// HeldKeys reads the keys held by a dead event, of destination, or of
// every destination when it is "", oldest first.
func (s *Store) HeldKeys(ctx context.Context, destination string) ([]HeldKey, error) {
	keys, err := store.QueryAll[HeldKey](ctx, s.db, heldKeysSQL, destination)
	if err != nil {
		return nil, fmt.Errorf("read held keys: %w", err)
	}
	return keys, nil
}

// heldKeysSQL reads, for each key of destination $1 (every one when empty) with a
// dead row, its first dead row and how many rows come after it.
const heldKeysSQL = `-- hookd.held_keys
	SELECT h.destination, h.order_key, h.event_id, h.dead_since,
	       (SELECT count(*) FROM webhook_events w
	        WHERE w.destination = h.destination AND w.order_key = h.order_key AND w.order_seq > h.order_seq) AS waiting
	FROM (
		SELECT DISTINCT ON (destination, order_key) destination, order_key, event_id, order_seq,
		       coalesce(last_attempt_at, created_at) AS dead_since
		FROM webhook_events
		WHERE order_key IS NOT NULL AND status = 'dead' AND ($1 = '' OR destination = $1)
		ORDER BY destination, order_key, order_seq
	) h
	ORDER BY h.dead_since, h.destination, h.order_key`

// ReleaseHeldKey lets key of destination go on past its dead events:
// they stay dead, and a retry delivers them whenever it is made, out of
// the key's order. It returns the event ids of the dead events it took
// out of the order; none when the key holds nothing.
func (s *Store) ReleaseHeldKey(ctx context.Context, destination, key string) ([]string, error) {
	ids, err := queryStrings(ctx, s.db, `-- hookd.release_held_key
		UPDATE webhook_events SET order_key = NULL
		WHERE destination = $1 AND order_key = $2 AND status = 'dead'
		RETURNING event_id`, destination, key)
	if err != nil {
		return nil, fmt.Errorf("release %s's key %q: %w", destination, key, err)
	}
	return ids, nil
}

// queryStrings runs a query of one text column and returns its values.
func queryStrings(ctx context.Context, db store.DBTX, sql string, args ...any) ([]string, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
