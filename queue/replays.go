package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookd/hookd/internal/store"
)

// Replays: events of the event log, chosen by a filter, delivered to the
// app again as a named background job (worker.Replayer), each delivery
// with the header Hookd-Replay. A replay's members are fixed when it
// starts, each with its state in replay_events; a member is delivered
// under the event's lease like any other run of the processor, and its
// state changes in the statement that gives the lease back, so a restart
// or a second replica never delivers a member the replay has finished.
//
// A replay's delivery that fails is recorded as failed in the replay and
// in the attempt history (path replay), and nothing else: a processed
// event stays processed, and a queued one keeps its attempts and schedule.
// A replay's success of a queued event resolves it, as a retry's would:
// the app has it now.

// ReplayState is where a replay stands.
type ReplayState string

const (
	ReplayRunning   ReplayState = "running"
	ReplayDone      ReplayState = "done"
	ReplayCancelled ReplayState = "cancelled"
)

// MemberState is where one event of a replay stands.
type MemberState string

const (
	MemberPending   MemberState = "pending"
	MemberDelivered MemberState = "delivered"
	MemberFailed    MemberState = "failed"
	// MemberSkipped: its payload was pruned or erased after the replay
	// started, or it became dead and the replay does not take dead events.
	MemberSkipped MemberState = "skipped"
)

// ReplayFilter chooses the events of a replay from the event log.
type ReplayFilter struct {
	// From and To bound when the events were received: From <= received
	// < To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Types are the event types to take; none takes every type. A type
	// ending in ".*" takes every type with that prefix.
	Types []string `json:"types,omitempty"`
	// Endpoint is the label of the endpoint they came through; "" for any.
	Endpoint string `json:"endpoint,omitempty"`
	// Processed takes processed events (while their payload is kept),
	// Pending those waiting on the retry queue, Dead dead ones: a replay
	// takes a dead event only when asked.
	Processed bool `json:"processed,omitempty"`
	Pending   bool `json:"pending,omitempty"`
	Dead      bool `json:"dead,omitempty"`
	// Object is an object or customer id the events are about; "" for any.
	Object string `json:"object,omitempty"`
	// Destination, when set, is the one destination the replay delivers
	// to, whether or not it took the events before: a destination added
	// after they arrived gets them (a backfill). Pending and Dead then
	// take the events whose delivery to it waits or is dead. "" is every
	// destination that takes each event.
	Destination string `json:"destination,omitempty"`
}

// MaxReplayName bounds a replay's name, which goes to the app in a header.
const MaxReplayName = 100

// CheckReplayName says why name cannot name a replay, or nil: it goes to
// the app in the Hookd-Replay header, so it is one line of printable
// characters.
func CheckReplayName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return errors.New("name the replay: the app sees the name in the Hookd-Replay header")
	case utf8.RuneCountInString(name) > MaxReplayName:
		return fmt.Errorf("the name is longer than %d characters; shorten it", MaxReplayName)
	case !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return errors.New("the name must be printable characters on one line")
	}
	return nil
}

// Check says what makes the filter unusable, or nil.
func (f ReplayFilter) Check() error {
	switch {
	case f.From.IsZero() || f.To.IsZero():
		return errors.New("give the time range the events were received in")
	case !f.From.Before(f.To):
		return errors.New("the time range ends before it starts")
	case !f.Processed && !f.Pending && !f.Dead:
		return errors.New("choose at least one status: processed, pending or dead")
	case len(f.Types) > 50:
		return errors.New("at most 50 event types")
	}
	return nil
}

// Summary is the filter in one line, for the audit log and the pages.
func (f ReplayFilter) Summary() string {
	var statuses []string
	for _, s := range []struct {
		on   bool
		name string
	}{{f.Processed, "processed"}, {f.Pending, "pending"}, {f.Dead, "dead"}} {
		if s.on {
			statuses = append(statuses, s.name)
		}
	}
	parts := []string{strings.Join(statuses, "+") + " events received " + f.From.UTC().Format("2006-01-02 15:04") +
		" to " + f.To.UTC().Format("2006-01-02 15:04 UTC")}
	if len(f.Types) > 0 {
		parts = append(parts, "types "+strings.Join(f.Types, ", "))
	}
	if f.Endpoint != "" {
		parts = append(parts, "endpoint "+f.Endpoint)
	}
	if f.Object != "" {
		parts = append(parts, "about "+f.Object)
	}
	if f.Destination != "" {
		parts = append(parts, "to destination "+f.Destination+" only")
	}
	return strings.Join(parts, "; ")
}

// matchSQL is the FROM and WHERE of the event log rows the filter in the
// parameters $1 to $9 chooses (ReplayFilter.args orders them), each with
// its queue row q when it has one and replayable: whether a payload is
// still there to send, in the event log or on the queue. The queue row is
// the delivery to the replay's destination ($9) when it has one, else
// the first destination's.
const matchSQL = `
	FROM event_log l
	LEFT JOIN LATERAL (
		SELECT * FROM webhook_events q0
		WHERE q0.source = '` + SourceStripe + `' AND q0.event_id = l.event_id AND ($9 = '' OR q0.destination = $9)
		ORDER BY q0.destination LIMIT 1
	) q ON true
	WHERE l.received_at >= $1 AND l.received_at < $2
	  AND (cardinality($3::text[]) = 0 OR l.event_type = ANY ($3::text[])
	       OR EXISTS (SELECT 1 FROM unnest($3::text[]) t
	                  WHERE t LIKE '%.*' AND starts_with(l.event_type, left(t, -1))))
	  AND ($4 = '' OR l.endpoint = $4)
	  AND (($5 AND q.status IS NULL AND l.processed_at IS NOT NULL)
	       OR ($6 AND q.` + pending + `)
	       OR ($7 AND q.status = 'dead'))
	  AND ($8 = '' OR l.object_id = $8 OR l.customer = $8)`

// replayableSQL is whether a row of matchSQL has a payload to send: a
// dead event whose payload was erased has none.
var replayableSQL = `(l.payload IS NOT NULL OR (q.payload IS NOT NULL AND NOT ` + queuedPayloadErasedSQL("q") + `))`

func (f ReplayFilter) args() []any {
	return []any{f.From, f.To, nonNil(f.Types), f.Endpoint, f.Processed, f.Pending, f.Dead, f.Object, f.Destination}
}

// ReplaySample is one event a filter matches, for the preview.
type ReplaySample struct {
	EventID    string    `db:"event_id"`
	EventType  string    `db:"event_type"`
	ReceivedAt time.Time `db:"received_at"`
	// Status is processed, pending or dead.
	Status     string `db:"status"`
	Replayable bool   `db:"replayable"`
}

// ReplayPreview is what a replay of a filter would deliver.
type ReplayPreview struct {
	// Matching is how many events the filter matches; Unreplayable how
	// many of them have no payload left (pruned or erased), which the
	// replay skips.
	Matching, Unreplayable int64
	// Sample is a few of the matching events, newest first.
	Sample []ReplaySample
}

// Replayable is how many events a replay of the filter would deliver.
func (p ReplayPreview) Replayable() int64 { return p.Matching - p.Unreplayable }

// ReplaySampleSize is how many matching events the preview shows.
const ReplaySampleSize = 5

// PreviewReplay counts the events f matches, and those of them with no
// payload left, and returns a few of them.
func (s *Store) PreviewReplay(ctx context.Context, f ReplayFilter) (ReplayPreview, error) {
	var p ReplayPreview
	if err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT `+replayableSQL+`)`+matchSQL,
		f.args()...).Scan(&p.Matching, &p.Unreplayable); err != nil {
		return ReplayPreview{}, fmt.Errorf("preview replay: %w", err)
	}
	sample := `
		SELECT l.event_id, l.event_type, l.received_at,
		       CASE WHEN q.status IS NULL THEN 'processed' WHEN q.status = 'dead' THEN 'dead' ELSE 'pending' END AS status,
		       ` + replayableSQL + ` AS replayable` + matchSQL + `
		ORDER BY l.received_at DESC, l.event_id LIMIT ` + strconv.Itoa(ReplaySampleSize)
	var err error
	if p.Sample, err = store.QueryAll[ReplaySample](ctx, s.db, sample, f.args()...); err != nil {
		return ReplayPreview{}, fmt.Errorf("preview replay: %w", err)
	}
	return p, nil
}

// ErrNothingToReplay is StartReplay's answer for a filter that matches no
// event with a payload left.
var ErrNothingToReplay = errors.New("no event with a payload left matches the filter")

// ErrReplayNotRunning is CancelReplay's answer for a replay that is done
// or cancelled already.
var ErrReplayNotRunning = errors.New("the replay is not running")

// Replay is a replay and its progress.
type Replay struct {
	ID          int64        `db:"id"`
	Name        string       `db:"name"`
	Filter      ReplayFilter `db:"filter"`
	Summary     string       `db:"summary"`
	CreatedBy   string       `db:"created_by"`
	CreatedAt   time.Time    `db:"created_at"`
	State       ReplayState  `db:"state"`
	FinishedAt  *time.Time   `db:"finished_at"`
	CancelledBy *string      `db:"cancelled_by"`
	Total       int64        `db:"total"`
	Delivered   int64        `db:"delivered"`
	Failed      int64        `db:"failed"`
	Skipped     int64        `db:"skipped"`
	// Unreplayable is how many matching events were left out at the start,
	// their payloads already gone.
	Unreplayable int64 `db:"unreplayable"`
	// Destination is the one destination the replay delivers to; nil for
	// every destination that takes each event.
	Destination *string `db:"destination"`
	// Now is the database's clock when the row was read, for the rate.
	Now time.Time `db:"now"`
}

// Remaining is how many members are still to deliver.
func (r Replay) Remaining() int64 { return r.Total - r.Delivered - r.Failed - r.Skipped }

// Rate is the replay's deliveries a second since it started (until it
// ended); 0 before the first.
func (r Replay) Rate() float64 {
	end := r.Now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	secs := end.Sub(r.CreatedAt).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(r.Total-r.Remaining()) / secs
}

// ETA is how long the rest will take at Rate; 0 when it is done or has
// no rate yet.
func (r Replay) ETA() time.Duration {
	rate := r.Rate()
	if r.State != ReplayRunning || rate <= 0 {
		return 0
	}
	return time.Duration(float64(r.Remaining()) / rate * float64(time.Second))
}

const replayColumns = `id, name, filter, summary, created_by, created_at, state, finished_at, cancelled_by,
	total, delivered, failed, skipped, unreplayable, destination, now() AS now`

// StartReplay starts a replay named name of the events f matches that
// still have a payload, on behalf of by, and returns it; ErrNothingToReplay
// when there are none. Run it in the transaction that audits it.
func (s *Store) StartReplay(ctx context.Context, name string, f ReplayFilter, by string) (Replay, error) {
	if err := CheckReplayName(name); err != nil {
		return Replay{}, err
	}
	if err := f.Check(); err != nil {
		return Replay{}, err
	}
	args := append(f.args(), strings.TrimSpace(name), f, f.Summary(), by)
	rows, err := s.db.Query(ctx, `
		WITH m AS (
			SELECT l.event_id, l.received_at, `+replayableSQL+` AS replayable`+matchSQL+`
		), r AS (
			INSERT INTO replays (name, filter, summary, created_by, total, unreplayable, destination)
			SELECT $10::text, $11::jsonb, $12::text, $13::text, count(*) FILTER (WHERE replayable), count(*) FILTER (WHERE NOT replayable),
			       NULLIF($9, '')
			FROM m
			HAVING count(*) FILTER (WHERE replayable) > 0
			RETURNING `+replayColumns+`
		), members AS (
			INSERT INTO replay_events (replay_id, event_id, received_at)
			SELECT r.id, m.event_id, m.received_at FROM m, r WHERE m.replayable
		)
		SELECT * FROM r`, args...)
	if err != nil {
		return Replay{}, fmt.Errorf("start replay: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Replay])
	if errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, ErrNothingToReplay
	}
	if err != nil {
		return Replay{}, fmt.Errorf("start replay: %w", err)
	}
	return r, nil
}

// CancelReplay stops a running replay on behalf of by: its members not
// delivered yet stay so. ErrReplayNotRunning when it is not running,
// ErrNotFound when there is none. Run it in the transaction that audits it.
func (s *Store) CancelReplay(ctx context.Context, id int64, by string) (Replay, error) {
	rows, err := s.db.Query(ctx, `
		UPDATE replays SET state = 'cancelled', finished_at = now(), cancelled_by = $2
		WHERE id = $1 AND state = 'running'
		RETURNING `+replayColumns, id, by)
	if err != nil {
		return Replay{}, fmt.Errorf("cancel replay %d: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Replay])
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.Replay(ctx, id); err != nil {
			return Replay{}, err
		}
		return Replay{}, ErrReplayNotRunning
	}
	if err != nil {
		return Replay{}, fmt.Errorf("cancel replay %d: %w", id, err)
	}
	return r, nil
}

// Replay returns replay id, or ErrNotFound.
func (s *Store) Replay(ctx context.Context, id int64) (Replay, error) {
	return oneRow[Replay](ctx, s.db, fmt.Sprintf("read replay %d", id), `SELECT `+replayColumns+` FROM replays WHERE id = $1`, id)
}

// MaxReplaysListed is the most replays one read of the list returns: the
// dashboard's page of them.
const MaxReplaysListed = 100

// Replays returns up to limit replays (at most MaxReplaysListed), newest
// first: the latest, or those before replay id before when it is not 0.
func (s *Store) Replays(ctx context.Context, before int64, limit int) ([]Replay, error) {
	out, err := store.QueryAll[Replay](ctx, s.db, `SELECT `+replayColumns+` FROM replays
		WHERE $1::bigint = 0 OR id < $1 ORDER BY id DESC LIMIT $2`, before, min(max(limit, 1), MaxReplaysListed))
	if err != nil {
		return nil, fmt.Errorf("read replays: %w", err)
	}
	return out, nil
}

// RunningReplay is what the runner needs of a running replay.
type RunningReplay struct {
	ID   int64  `db:"id"`
	Name string `db:"name"`
	// Dead: the replay takes dead events, which it was asked to.
	Dead bool `db:"dead"`
	// Destination is the one destination it delivers to; "" for every
	// destination that takes each event.
	Destination string `db:"destination"`
}

// RunningReplays returns the running replays, oldest first.
func (s *Store) RunningReplays(ctx context.Context) ([]RunningReplay, error) {
	out, err := store.QueryAll[RunningReplay](ctx, s.db, `
		SELECT id, name, coalesce((filter->>'dead')::boolean, false) AS dead, coalesce(destination, '') AS destination
		FROM replays WHERE state = 'running' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read running replays: %w", err)
	}
	return out, nil
}

// ReplayRunning reports whether replay id is still running.
func (s *Store) ReplayRunning(ctx context.Context, id int64) (bool, error) {
	var running bool
	err := s.db.QueryRow(ctx, `SELECT state = 'running' FROM replays WHERE id = $1`, id).Scan(&running)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read replay %d: %w", id, err)
	}
	return running, nil
}

// ReplayMember is a member of a replay the runner leased, with what its
// delivery needs, read after its lease was taken.
type ReplayMember struct {
	EventID   string
	EventType string
	Endpoint  string
	Livemode  *bool
	Account   *string
	// Payload is the exact payload to send: the event log's, or the queue
	// row's; nil when neither is left.
	Payload []byte
	// Attempts is the event's attempts so far (its queue row's, or the
	// retry that processed it); the delivery's Hookd-Attempt.
	Attempts int
	// Dead: the event is dead on the queue.
	Dead bool
	// TraceParent is the W3C traceparent of the delivery that queued the
	// event, while it is on the queue and was traced; "" otherwise (a
	// marker keeps none).
	TraceParent string
}

// ReplayClaim is a batch of a replay's members, each with its lease, all
// with one owner token.
type ReplayClaim struct {
	Owner uuid.UUID
	// Deadline is when every processor run under these leases must have
	// ended, on this machine's clock.
	Deadline time.Time
	Members  []ReplayMember
}

// ClaimReplayed takes up to n pending members of replay id, oldest first,
// each with its event's lease for a processor run of processFor, and reads
// what their deliveries need. The leases are not marked started: each
// member's is when its own run starts (StartReplayed), so a crash leaves as
// interrupted only the members that were running. A member another claim
// is taking at this moment is skipped (FOR UPDATE SKIP LOCKED), and so is
// one whose event someone else holds the lease of (a delivery, the retry
// loop, another replay): it stays pending, for a later claim. As
// ClaimAttempts does, it never waits on a lease being given back with its
// outcome.
//
// A suspect (suspects.go) is never claimed: it runs alone, through
// ClaimReplaySuspect. A member whose lease the claim finds with a run that
// started and never reported (its process died) is not claimed either: it
// is charged nothing, becomes a suspect, and its lease is left free for
// its run alone.
func (s *Store) ClaimReplayed(ctx context.Context, id int64, n int, processFor time.Duration) (ReplayClaim, error) {
	c := ReplayClaim{Owner: uuid.New(), Deadline: time.Now().Add(processFor)}
	rows, err := s.db.Query(ctx, claimReplayedSQL, id, n, [16]byte(c.Owner), leaseSeconds(processFor), s.replica.arg())
	if err != nil {
		return ReplayClaim{}, fmt.Errorf("claim replay %d: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return ReplayClaim{}, fmt.Errorf("claim replay %d: %w", id, err)
	}
	if len(ids) == 0 {
		return c, nil
	}
	if c.Members, err = s.replayMembers(ctx, ids); err != nil {
		return ReplayClaim{}, fmt.Errorf("read replay %d's events: %w", id, err)
	}
	return c, nil
}

// claimReplayedSQL leases up to $2 pending members of replay $1, not
// suspects, for owner $3 of replica $5 with leases of $4 seconds, and
// returns the ids it claimed. A takeover of a run cut short makes its
// event a suspect (suspectedSQL), leaves the lease expired at once and
// claims nothing.
var claimReplayedSQL = `-- hookd.claim_replayed
	WITH next AS (
		SELECT m.event_id FROM replay_events m
		WHERE m.replay_id = $1 AND m.state = 'pending' AND ` + notSuspectSQL("m.event_id") + `
		ORDER BY m.received_at, m.event_id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	), held AS (` + heldLeasesSQL("SELECT event_id FROM next") + `
	), leased AS (` + insertLeasesSQL(`
		SELECT n.event_id, $3::uuid, '`+string(PathReplay)+`',
		       CASE WHEN coalesce(h.started, false) THEN now() ELSE now() + make_interval(secs => $4) END,
		       $5::uuid, NULL::timestamptz
		FROM next n LEFT JOIN held h USING (event_id)
		WHERE ((h.event_id IS NULL AND NOT EXISTS (SELECT 1 FROM webhook_leases x WHERE x.event_id = n.event_id))
		       OR NOT h.live)
		  AND `+grantableSQL("$5")+`
		ORDER BY n.event_id`) + `
	), suspected AS (` + suspectedSQL("leased") + `
	)
	SELECT event_id FROM leased WHERE NOT cut_short ORDER BY event_id`

// StartReplayed marks started the lease of a replay's member eventID held
// by owner, as its run starts, and reports whether it still held it. As a
// retry's start, the mark is all it writes: the lease is unlogged, so it
// costs no WAL and no flushed commit.
func (s *Store) StartReplayed(ctx context.Context, owner uuid.UUID, eventID string) (bool, error) {
	op := &startOp{ids: []string{eventID}, owners: []uuid.UUID{owner}}
	err := s.shortTx(ctx, op.queue, op.read)
	if err != nil {
		return false, fmt.Errorf("start replay member %s: %w", eventID, err)
	}
	return op.started()[0], nil
}

// replayMembers reads what the deliveries of the leased events ids need,
// in their order. It reads once the leases are held, so what the other
// holders committed with their release is seen: a queued event resolved
// meanwhile, or made dead.
func (s *Store) replayMembers(ctx context.Context, ids []string) ([]ReplayMember, error) {
	byID := make(map[string]ReplayMember, len(ids))
	rows, err := s.db.Query(ctx, `
		SELECT l.event_id, l.event_type, l.endpoint, l.livemode, l.account, l.payload,
		       CASE WHEN NOT `+queuedPayloadErasedSQL("q")+` THEN q.payload END,
		       coalesce(q.attempts, l.processed_attempt, 0), coalesce(q.status = 'dead', false),
		       coalesce(q.trace_parent, '')
		FROM event_log l
		LEFT JOIN webhook_events q ON q.source = '`+SourceStripe+`' AND q.event_id = l.event_id
		WHERE l.event_id = ANY ($1::text[])`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var m ReplayMember
		var logPayload, queuePayload []byte
		if err := rows.Scan(&m.EventID, &m.EventType, &m.Endpoint, &m.Livemode, &m.Account, &logPayload, &queuePayload,
			&m.Attempts, &m.Dead, &m.TraceParent); err != nil {
			return nil, err
		}
		m.Payload = queuePayload
		if logPayload != nil {
			if m.Payload, err = decodeLoggedPayload(m.EventID, logPayload); err != nil {
				return nil, err
			}
		}
		byID[m.EventID] = m
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	members := make([]ReplayMember, len(ids))
	for i, eid := range ids {
		m, ok := byID[eid]
		if !ok {
			// Its entry left the event log (its marker was pruned): nothing
			// is left to send.
			m = ReplayMember{EventID: eid}
		}
		members[i] = m
	}
	return members, nil
}

// ReplaySettleKind is what became of a leased member.
type ReplaySettleKind string

const (
	ReplaySettleDelivered ReplaySettleKind = ReplaySettleKind(MemberDelivered)
	ReplaySettleFailed    ReplaySettleKind = ReplaySettleKind(MemberFailed)
	ReplaySettleSkipped   ReplaySettleKind = ReplaySettleKind(MemberSkipped)
	// ReplaySettleReleased: it was not delivered (the replay was
	// cancelled, hookd is stopping, delivery is held): its lease is given
	// back and it stays pending.
	ReplaySettleReleased ReplaySettleKind = "released"
	// ReplaySettleCrashed: a suspect given up (ReplaySuspect.GivenUp),
	// not run: the member is failed with the crash as its error, and the
	// event stays a suspect.
	ReplaySettleCrashed ReplaySettleKind = "crashed"
)

// ReplaySettled is a leased member after its delivery, as SettleReplayed
// takes it.
type ReplaySettled struct {
	EventID string
	Kind    ReplaySettleKind
	// Payload is the member's payload: a delivered member of a queued
	// event resolves it, and its marker keeps the payload.
	Payload []byte
	// Attempt is the delivery, for the attempt history; nil for none.
	Attempt *NewAttempt
	// Error is the member's error when it has no Attempt: a crashed
	// one's.
	Error string
	// Fenced: released because its replica's fence stopped the run
	// (fenced.go), which is counted.
	Fenced bool
}

// SettleReplayed writes the outcomes of members of replay id leased with
// owner and gives their leases back, in one short transaction, and returns
// for each whether it was written: false when its lease was no longer its
// owner's, and then nothing of it was. A delivered member of a queued
// event resolves the event (its queue row goes, and its marker is written
// saying a replay processed it); a failed one changes nothing but
// the replay. The replay's counts change in the same statement, and it is
// done when its last member is. A run released because the fence stopped
// it (ReplaySettled.Fenced) is counted first (fenced.go). A suspect's run
// alone that delivered or
// failed clears the suspect; one given back, skipped or crashed leaves it
// a suspect.
func (s *Store) SettleReplayed(ctx context.Context, id int64, owner uuid.UUID, settled []ReplaySettled) ([]bool, error) {
	n := len(settled)
	ids, kinds, errs := make([]string, n), make([]string, n), make([]string, n)
	owners, statuses := make([]uuid.UUID, n), make([]int, n)
	payloads := make([][]byte, n)
	var a attemptColumns
	var tally breakerTally
	for i, st := range settled {
		ids[i], owners[i], kinds[i] = st.EventID, owner, string(st.Kind)
		if st.Kind == ReplaySettleDelivered {
			payloads[i] = compressPayload(st.Payload)
		}
		errs[i] = st.Error
		if st.Attempt != nil {
			statuses[i], errs[i] = st.Attempt.HTTPStatus, st.Attempt.Error
			a.add(*st.Attempt, owner)
			tally.add(st.Attempt, st.Kind == ReplaySettleDelivered)
		}
	}
	args := append([]any{ids, uuidArray(owners), kinds, statuses, errs, id, payloads}, a.args()...)
	var fenced fenceCutOp
	for _, st := range settled {
		if st.Fenced && st.Kind == ReplaySettleReleased {
			fenced.add(st.EventID, owner)
		}
	}
	var released []string
	settle := func() error {
		var counted bool
		return s.shortTx(ctx, func(b *pgx.Batch) {
			fenced.queue(b)
			b.Queue(settleReplayedSQL, args...)
			counted = tally.queue(b, s.breaker)
		}, func(br pgx.BatchResults) (err error) {
			if err := fenced.read(br); err != nil {
				return err
			}
			if released, err = collect(br, pgx.RowTo[string]); err != nil || !counted {
				return err
			}
			return tally.read(br, s.breaker)
		})
	}
	err := settle()
	if isDeadlock(err) {
		// A retry loop's claim whose snapshot predates this replay's lease
		// can hold a delivered member's queue row while it waits on the
		// lease this statement gives back. PostgreSQL ends one of the two;
		// the claim then finds the lease live and passes the event by, so
		// the settle goes through the second time. Left failed, the member
		// would be delivered again when its lease expired.
		err = settle()
	}
	if err != nil {
		return nil, fmt.Errorf("settle replay %d: %w", id, err)
	}
	done := make(map[string]bool, len(released))
	for _, e := range released {
		done[e] = true
	}
	out := make([]bool, n)
	for i := range settled {
		out[i] = done[ids[i]]
	}
	return out, nil
}

// settleReplayedSQL releases the leases of events $1 held by owners $2 and
// writes each released one's outcome $3 (a member state, or released),
// with its HTTP status $4 and error $5, for replay $6. A delivered member
// of a queued event resolves it: its marker takes the event log's columns
// from the queue row, and its payload $7 (compressPayload). The attempts to
// record follow from $8 on. It returns
// the released events.
var settleReplayedSQL = `-- hookd.settle_replayed
	WITH freed AS (` + releaseLeasesSQL("$1", "$2") + `
	), released AS (
		SELECT o.*, f.alone FROM freed f
		JOIN unnest($1::text[], $2::uuid[], $3::text[], $4::int[], $5::text[], $7::bytea[])
		     AS o(event_id, owner, kind, http_status, error, payload)
		  ON o.event_id = f.event_id AND o.owner = f.owner
	), members AS (
		UPDATE replay_events m
		SET state = CASE WHEN r.kind = '` + string(ReplaySettleCrashed) + `' THEN '` + string(MemberFailed) + `' ELSE r.kind END,
		    finished_at = now(), http_status = NULLIF(r.http_status, 0), error = NULLIF(r.error, '')
		FROM released r
		WHERE m.replay_id = $6 AND m.event_id = r.event_id AND m.state = 'pending' AND r.kind <> 'released'
		RETURNING m.event_id, m.state
	), resolved AS (
		DELETE FROM webhook_events e USING members m, released r
		WHERE m.state = 'delivered' AND r.event_id = m.event_id
		  AND e.source = '` + SourceStripe + `' AND e.event_id = m.event_id
		  AND e.destination = coalesce((SELECT p.destination FROM replays p WHERE p.id = $6), e.destination)
		RETURNING e.event_id, e.event_type, e.endpoint, e.livemode, e.account, e.api_version, e.object_id, e.object_type,
		          e.customer, e.stripe_created, e.created_at, e.attempts, r.payload, '` + string(LogReplay) + `' AS how,
		          e.payload_erased_at, e.payload_erased_by, e.id
	), marked AS (` + insertResolvedMarkersSQL + `
	), counted AS (
		UPDATE replays p
		SET delivered = p.delivered + c.delivered, failed = p.failed + c.failed, skipped = p.skipped + c.skipped,
		    state = CASE WHEN p.state = 'running' AND p.delivered + p.failed + p.skipped
		                      + c.delivered + c.failed + c.skipped >= p.total THEN 'done' ELSE p.state END,
		    finished_at = CASE WHEN p.state = 'running' AND p.delivered + p.failed + p.skipped
		                      + c.delivered + c.failed + c.skipped >= p.total THEN now() ELSE p.finished_at END
		FROM (SELECT count(*) FILTER (WHERE state = 'delivered') AS delivered,
		             count(*) FILTER (WHERE state = 'failed') AS failed,
		             count(*) FILTER (WHERE state = 'skipped') AS skipped
		      FROM members) c
		WHERE p.id = $6 AND c.delivered + c.failed + c.skipped > 0
	), recorded AS (` + givenAttemptsSQL(8, "released") + `
	), cleared AS (
		UPDATE webhook_suspects s SET cleared_at = now()
		FROM released r
		WHERE s.event_id = r.event_id AND r.alone AND r.kind IN ('delivered', 'failed') AND s.cleared_at IS NULL
	)
	SELECT event_id FROM released`

// isDeadlock says whether err is PostgreSQL's deadlock_detected.
func isDeadlock(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "40P01"
}

// ReplayOfEvent is a replay an event was part of, and what became of it
// there.
type ReplayOfEvent struct {
	ID         int64       `db:"id"`
	Name       string      `db:"name"`
	CreatedAt  time.Time   `db:"created_at"`
	State      MemberState `db:"state"`
	FinishedAt *time.Time  `db:"finished_at"`
	HTTPStatus *int        `db:"http_status"`
	Error      *string     `db:"error"`
	// ReplayState is where the replay stands: a pending member of a
	// cancelled replay will not be delivered.
	ReplayState ReplayState `db:"replay_state"`
}

// ReplaysOfEvent returns every replay eventID was part of, newest first.
func (s *Store) ReplaysOfEvent(ctx context.Context, eventID string) ([]ReplayOfEvent, error) {
	out, err := store.QueryAll[ReplayOfEvent](ctx, s.db, `
		SELECT p.id, p.name, p.created_at, m.state, m.finished_at, m.http_status, m.error, p.state AS replay_state
		FROM replay_events m JOIN replays p ON p.id = m.replay_id
		WHERE m.event_id = $1
		ORDER BY p.id DESC`, eventID)
	if err != nil {
		return nil, fmt.Errorf("read replays of %s: %w", eventID, err)
	}
	return out, nil
}

// FailedMember is a member of a replay whose delivery failed, with what
// the app answered.
type FailedMember struct {
	EventID string `db:"event_id"`
	// EventType is the event's type; nil when the event log no longer has
	// its entry (its marker was pruned).
	EventType  *string   `db:"event_type"`
	FailedAt   time.Time `db:"finished_at"`
	HTTPStatus *int      `db:"http_status"`
	// Error is the failure as the attempt history keeps it; nil for none.
	Error *string `db:"error"`
}

// MaxFailedMembersListed bounds the failed members a replay's page lists;
// the replay's Failed counts them all.
const MaxFailedMembersListed = 50

// FailedMembers returns the failed members of replay id, newest first, at
// most MaxFailedMembersListed. A member's state, status and error are
// written with its attempt (SettleReplayed), so replay_events holds them.
// The replay's members are read through the primary key's range of the
// replay and the newest failures kept: no index orders a replay's
// failures, and one would need a migration, so the read grows with the
// replay (about 45 ms for 200,000 members), which is why only the page's
// load reads it and not its progress, refreshed every second. Only the
// members kept look up their type in the event log, each by its id: the
// LIMIT keeps the planner from joining the whole view.
func (s *Store) FailedMembers(ctx context.Context, id int64) ([]FailedMember, error) {
	out, err := store.QueryAll[FailedMember](ctx, s.db, `
		WITH failed AS (
			SELECT event_id, finished_at, http_status, error FROM replay_events
			WHERE replay_id = $1 AND state = '`+string(MemberFailed)+`'
			ORDER BY finished_at DESC, event_id
			LIMIT $2
		)
		SELECT f.event_id, l.event_type, f.finished_at, f.http_status, f.error
		FROM failed f
		LEFT JOIN LATERAL (SELECT l.event_type FROM event_log l WHERE l.event_id = f.event_id LIMIT 1) l ON true
		ORDER BY f.finished_at DESC, f.event_id`, id, MaxFailedMembersListed)
	if err != nil {
		return nil, fmt.Errorf("read failed members of replay %d: %w", id, err)
	}
	return out, nil
}

// PruneReplays deletes the replays that ended more than olderThan ago
// (HOOKD_MARKER_RETENTION, the event log's), with their members, and
// returns how many it deleted.
func (s *Store) PruneReplays(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.Delete(ctx, s.db, "prune replays",
		`DELETE FROM replays WHERE state <> 'running' AND finished_at < now() - make_interval(secs => $1)`,
		olderThan.Seconds())
}
