package worker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookd/hookd/queue"
)

var (
	// ErrBadSignature means the Stripe-Signature header is missing,
	// malformed, stale, or matches no configured secret. It is wrapped with
	// the reason.
	ErrBadSignature = errors.New("bad signature")
	// ErrBadPayload means the body is not a Stripe event: not JSON, or
	// without a string id and type. It is wrapped with the reason.
	ErrBadPayload = errors.New("bad payload")
	// ErrNoSecret means no signing secret is configured, so no delivery can
	// be verified; Stripe keeps redelivering until one is.
	ErrNoSecret = errors.New("no Stripe signing secret configured")
)

// Why a delivery was refused, for the rejection log. Each is an
// ErrBadSignature or an ErrBadPayload, with the same message, and is
// wrapped with the reason the sender is told.
var (
	ErrNoSignature        = fmt.Errorf("%w", ErrBadSignature)
	ErrMalformedSignature = fmt.Errorf("%w", ErrBadSignature)
	ErrStaleSignature     = fmt.Errorf("%w", ErrBadSignature)
	ErrWrongSignature     = fmt.Errorf("%w", ErrBadSignature)
	ErrNotJSON            = fmt.Errorf("%w", ErrBadPayload)
	ErrBadEventID         = fmt.Errorf("%w", ErrBadPayload)
	ErrBadEventType       = fmt.Errorf("%w", ErrBadPayload)
)

// SignatureTolerance is how old a signature's timestamp may be: Stripe's
// own libraries' default, which bounds how long a captured delivery can be
// replayed.
const SignatureTolerance = 300 * time.Second

// DefaultProcessTimeout bounds one processor run unless configured: it is
// HOOKD_FORWARD_TIMEOUT's default, well within the time Stripe waits for
// an answer.
const DefaultProcessTimeout = 10 * time.Second

// writeTimeout bounds the writes of an outcome once the processor has run.
// They do not stop when the request is cancelled: the processor's side
// effects happened, and recording them spares a second run on redelivery.
const writeTimeout = 5 * time.Second

// Outcome is what Receive did with a valid delivery. Each is answered 200.
type Outcome int

const (
	// Processed: the processor succeeded and the dedup marker is committed.
	Processed Outcome = iota + 1
	// Duplicate: the event had been processed before; nothing ran.
	Duplicate
	// AlreadyQueued: the event is on the retry queue (dead included), which
	// owns it; nothing ran.
	AlreadyQueued
	// Queued: the processor failed and the event is committed to the retry
	// queue.
	Queued
	// Deferred: every inline slot was taken, so the event is committed to
	// the retry queue, due at once, without being processed.
	Deferred
)

func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case AlreadyQueued:
		return "already_queued"
	case Queued:
		return "queued"
	case Deferred:
		return "deferred"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Secrets are the Stripe signing secrets (whsec_...) a delivery may be
	// signed with: more than one while a secret is being rolled. With none,
	// Receive fails every delivery with ErrNoSecret.
	Secrets []string
	// Processor handles each new event. Default: Discard.
	Processor Processor
	// ProcessTimeout bounds the inline processor run. Default:
	// DefaultProcessTimeout.
	ProcessTimeout time.Duration
	// Metrics, when set, records processing durations.
	Metrics *Metrics
	// InlineConcurrency bounds the deliveries processed at once while
	// Stripe waits; a new event past it is deferred to the retry queue and
	// answered at once. Zero: no bound (hookd serve derives one from its
	// pool size).
	InlineConcurrency int
}

// Receiver runs the pipeline for one delivery from Stripe.
type Receiver struct {
	store   *queue.Store
	logger  *slog.Logger
	secrets []string
	proc    Processor
	timeout time.Duration
	metrics *Metrics
	inline  inlineSlots
	batches *deliveryBatches
}

// NewReceiver returns a Receiver over store. It logs at once when no secret
// is configured, since every delivery will then be refused.
func NewReceiver(store *queue.Store, logger *slog.Logger, cfg ReceiverConfig) *Receiver {
	logger = logger.With("component", "receiver")
	if len(cfg.Secrets) == 0 {
		logger.Warn("no STRIPE_WEBHOOK_SECRET configured: every webhook is answered 503 until one is")
	}
	r := &Receiver{
		store:   store,
		logger:  logger,
		secrets: cfg.Secrets,
		proc:    cmp.Or[Processor](cfg.Processor, Discard),
		timeout: cmp.Or(cfg.ProcessTimeout, DefaultProcessTimeout),
		metrics: cfg.Metrics,
		inline:  newInlineSlots(cfg.InlineConcurrency),
	}
	r.batches = &deliveryBatches{run: r.runBatch, size: maxBatch, metrics: cfg.Metrics}
	if r.inline != nil {
		r.batches.size = min(maxBatch, cap(r.inline))
	}
	return r
}

// Receive verifies, deduplicates and processes one delivery: payload is the
// exact request body, sigHeader the Stripe-Signature header.
//
// A nil error means the outcome is committed: the marker, or the queue row.
// ErrBadSignature and ErrBadPayload (wrapped with a reason) mean the
// delivery was refused and nothing was stored. queue.ErrEventLocked means
// another delivery of the event is being handled; any other error means the
// outcome could not be made durable, and Stripe should deliver again.
func (r *Receiver) Receive(ctx context.Context, payload []byte, sigHeader string) (Outcome, error) {
	if err := r.verify(payload, sigHeader); err != nil {
		return 0, err
	}
	ev, err := parseEvent(payload)
	if err != nil {
		return 0, err
	}
	outcome, err := r.receive(ctx, ev, payload, sigHeader, queue.PathInline)
	if err != nil {
		return 0, &EventError{EventID: ev.ID, Err: err}
	}
	return outcome, nil
}

// Recover runs an event that Stripe's delivery never brought, read from
// Stripe's Events API, through the same locked pipeline as a delivery: the
// per-event lock, dedup, the processor, then the marker or the queue row. Its
// attempt is recorded with path reconcile, which is what tells a recovered
// event apart afterwards. There is no signature to verify: the payload came
// from Stripe's API, over TLS, read with hookd's own key.
//
// Its results are Receive's: queue.ErrEventLocked means a delivery of the
// event is being handled at this moment.
func (r *Receiver) Recover(ctx context.Context, payload []byte) (Outcome, error) {
	ev, err := parseEvent(payload)
	if err != nil {
		return 0, err
	}
	outcome, err := r.receive(ctx, ev, payload, "", queue.PathReconcile)
	if err != nil {
		return 0, &EventError{EventID: ev.ID, Err: err}
	}
	return outcome, nil
}

// EventError is an error Receive met once it knew the event's id, so that
// whoever logs it can say which event it was.
type EventError struct {
	EventID string
	Err     error
}

func (e *EventError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error, e.g. queue.ErrEventLocked.
func (e *EventError) Unwrap() error { return e.Err }

// receive runs a verified event through the locked part of the pipeline,
// in a batch with the deliveries that arrive meanwhile (deliveryBatches);
// path says who brought it, for the attempt history and the metrics.
func (r *Receiver) receive(ctx context.Context, ev event, payload []byte, sigHeader string,
	path queue.AttemptPath) (Outcome, error) {
	d := &delivery{ctx: ctx, ev: ev, payload: payload, sigHeader: sigHeader, path: path}
	r.batches.do(d)
	return d.outcome, d.err
}

// runBatch handles a batch of deliveries and answers each.
func (r *Receiver) runBatch(batch []*delivery, stepAside func()) {
	live := batch[:0:0]
	for _, d := range batch {
		if err := d.ctx.Err(); err != nil {
			// Stripe hung up while the delivery waited for its batch: it
			// delivers again, and nothing was done.
			d.answer(0, err)
			continue
		}
		live = append(live, d)
	}
	r.runGroup(live, stepAside)
}

// processed is the processor's result for one delivery of a group.
type processed struct {
	res  Result
	took time.Duration
}

// runGroup handles deliveries in one transaction, in two round trips to the
// database: the events' locks with the read of their states, then their
// outcomes with the COMMIT. Between the two, the processor runs for every
// new event that holds an inline slot (or has no need of one), all at once.
func (r *Receiver) runGroup(group []*delivery, stepAside func()) {
	if len(group) == 0 {
		return
	}
	// No one delivery's cancellation ends the batch: its writes record
	// side effects the app has had, for every event in it.
	ctx := context.WithoutCancel(group[0].ctx)
	ids := make([]string, len(group))
	for i, d := range group {
		ids[i] = d.ev.ID
	}
	r.metrics.observeBatch(len(group))
	lockCtx, cancel := context.WithTimeout(ctx, writeTimeout)
	tx, states, err := r.store.BeginEvents(lockCtx, queue.SourceStripe, ids)
	cancel()
	if err != nil {
		for _, d := range group {
			d.answer(0, err)
		}
		return
	}
	defer tx.Rollback(ctx)

	var fresh, toProcess, toDefer []*delivery
	for i, d := range group {
		switch states[i] {
		case queue.DeliveryBusy:
			d.answer(0, queue.ErrEventLocked)
		case queue.DeliveryProcessed:
			d.answer(Duplicate, nil)
		case queue.DeliveryQueued:
			d.answer(AlreadyQueued, nil)
		default:
			// The inline slots guard the answers Stripe waits for, and
			// cover the wait for the app only. A recovery has no one
			// waiting and its own bound, like the retry loop: reconcile
			// processes a few events at a time.
			if d.path == queue.PathInline && d.release == nil && !d.deferred {
				release, ok := r.inline.tryAcquire()
				d.release, d.deferred = release, !ok
			}
			fresh = append(fresh, d)
			if d.deferred {
				toDefer = append(toDefer, d)
			} else {
				toProcess = append(toProcess, d)
			}
		}
	}
	if len(toDefer) > 0 && len(toProcess) > 0 {
		// The slots ran out inside this batch. The deferred events must not
		// wait for the app with the others, so the batch starts over as two,
		// side by side, before anything ran: their locks and states are
		// taken again, and each keeps its slot or its deferral.
		_ = tx.Rollback(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { r.runGroup(toDefer, stepAside) })
		r.runGroup(toProcess, stepAside)
		wg.Wait()
		return
	}
	if len(fresh) == 0 {
		return
	}
	results := r.processAll(fresh, stepAside)

	var rec queue.Received
	for i, d := range fresh {
		attempt := queue.NewAttempt{
			Source: queue.SourceStripe, EventID: d.ev.ID, Duration: results[i].took,
			Succeeded: results[i].res.Err == nil, HTTPStatus: results[i].res.HTTPStatus, Path: d.path,
		}
		switch {
		case d.deferred:
			rec.Deferred = append(rec.Deferred, failedEvent(d, r.deferReason()))
		case attempt.Succeeded && d.path == queue.PathInline:
			// Processed on its first delivery: the marker is its whole record.
			rec.Processed = append(rec.Processed, d.ev.ID)
		case attempt.Succeeded:
			// Recovered by reconciliation: its attempt is what says so,
			// since a marker alone means a first delivery.
			rec.Recorded = append(rec.Recorded, attempt)
		default:
			// Failed: from here on the event keeps its history, starting
			// with this attempt.
			attempt.Error = errorText(results[i].res.Err)
			rec.Failed = append(rec.Failed, queue.FailedAttempt{Event: failedEvent(d, attempt.Error), Attempt: attempt})
		}
	}
	writeCtx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := tx.CommitReceived(writeCtx, rec); err != nil {
		for _, d := range fresh {
			d.answer(0, err)
		}
		return
	}
	for i, d := range fresh {
		switch {
		case d.deferred:
			r.logger.InfoContext(d.ctx, "event deferred to the retry queue: the app is busy", "event_id", d.ev.ID,
				"event_type", d.ev.Type, "inline_concurrency", cap(r.inline))
			d.answer(Deferred, nil)
		case results[i].res.Err == nil:
			d.answer(Processed, nil)
		default:
			r.logger.WarnContext(d.ctx, "event queued for retry", "event_id", d.ev.ID,
				"event_type", d.ev.Type, "err", results[i].res.Err)
			d.answer(Queued, nil)
		}
	}
}

// processAll runs the processor for every delivery of fresh that is not
// deferred, all at once, each with its own request's context, and gives
// each one's inline slot back as soon as its app call ends. A group that
// waits for the app longer than batchStepAside steps aside.
func (r *Receiver) processAll(fresh []*delivery, stepAside func()) []processed {
	results := make([]processed, len(fresh))
	var run []int
	for i, d := range fresh {
		if !d.deferred {
			run = append(run, i)
		}
	}
	if len(run) == 0 {
		return results
	}
	if _, ok := r.proc.(discard); ok {
		// Nothing to wait for: no goroutine, no timeout, no app.
		for _, i := range run {
			fresh[i].releaseSlot()
			r.metrics.observeProcess(fresh[i].path, true, 0)
		}
		return results
	}
	slow := time.AfterFunc(batchStepAside, stepAside)
	defer slow.Stop()
	one := func(i int) {
		d := fresh[i]
		res, took := process(d.ctx, r.proc, r.timeout, Delivery{
			EventID: d.ev.ID, EventType: d.ev.Type, Payload: d.payload, Attempt: 0,
		})
		d.releaseSlot()
		r.metrics.observeProcess(d.path, res.Err == nil, took)
		results[i] = processed{res, took}
	}
	if len(run) == 1 {
		one(run[0])
		return results
	}
	var wg sync.WaitGroup
	for _, i := range run {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return results
}

// failedEvent is d as the retry queue keeps it, with why it is there.
func failedEvent(d *delivery, reason string) queue.FailedEvent {
	return queue.FailedEvent{
		Source: queue.SourceStripe, EventID: d.ev.ID, EventType: d.ev.Type,
		Payload: d.payload, Signature: d.sigHeader, Error: reason,
	}
}

// verify checks sigHeader against every configured secret with stripe-go.
// The header's shape and age do not depend on the secret, so those reasons
// are final at the first secret; only "no signature matches" moves on to
// the next one.
func (r *Receiver) verify(payload []byte, sigHeader string) error {
	if len(r.secrets) == 0 {
		return ErrNoSecret
	}
	for _, secret := range r.secrets {
		err := webhook.ValidatePayloadWithTolerance(payload, sigHeader, secret, SignatureTolerance)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, webhook.ErrNotSigned):
			return fmt.Errorf("%w: no Stripe-Signature header", ErrNoSignature)
		case errors.Is(err, webhook.ErrInvalidHeader):
			return fmt.Errorf("%w: malformed Stripe-Signature header", ErrMalformedSignature)
		case errors.Is(err, webhook.ErrTooOld):
			return fmt.Errorf("%w: timestamp older than the 300 s tolerance, or missing", ErrStaleSignature)
		case errors.Is(err, webhook.ErrNoValidSignature):
			continue
		default:
			return fmt.Errorf("%w: %v", ErrMalformedSignature, err)
		}
	}
	return fmt.Errorf("%w: no v1 signature matches a configured secret", ErrWrongSignature)
}

// event is the part of a Stripe event the pipeline reads.
type event struct {
	ID   string
	Type string
}

// maxIDLen bounds an event id and type. Stripe's are a few dozen
// characters; the bound keeps an absurd one from failing the index insert
// (a b-tree entry must fit a third of a page), which would answer 503 and
// have Stripe redeliver it forever.
const maxIDLen = 255

// parseEvent reads the id and type of a Stripe event. The payload itself is
// never re-encoded: processors and the queue get the exact bytes.
func parseEvent(payload []byte) (event, error) {
	if !utf8.Valid(payload) {
		return event{}, fmt.Errorf("%w: body is not valid UTF-8", ErrNotJSON)
	}
	id, typ, isObject, valid := scanEvent(payload)
	if !valid || !isObject {
		return event{}, fmt.Errorf("%w: body is not a JSON object", ErrNotJSON)
	}
	var ev event
	if err := stringField(id, "id", ErrBadEventID, &ev.ID); err != nil {
		return event{}, err
	}
	if err := stringField(typ, "type", ErrBadEventType, &ev.Type); err != nil {
		return event{}, err
	}
	return ev, nil
}

func stringField(raw json.RawMessage, name string, bad error, dst *string) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: no %q field", bad, name)
	}
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		// A string without escapes, as Stripe's ids and types are: the
		// scan has checked it, and its text is between the quotes.
		*dst = string(raw[1 : len(raw)-1])
	} else if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%w: %q is not a string", bad, name)
	}
	if *dst == "" || len(*dst) > maxIDLen {
		return fmt.Errorf("%w: %q must have 1 to %d characters", bad, name, maxIDLen)
	}
	for _, c := range *dst {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("%w: %q has unprintable characters", bad, name)
		}
	}
	return nil
}
