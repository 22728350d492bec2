// Package receiver runs one delivery from Stripe through hookd's pipeline: the
// signature check, the event's lease, the processor while Stripe waits (or
// the retry queue when every inline slot is taken), and the outcome. Receive
// returns nil only once the outcome is durable, and refuses, storing
// nothing, what can never succeed.
package receiver

// It holds the refusal errors and the one map from them to the rejection
// log's reasons (RejectReason), the signature's tolerance, and the inline
// slots. No transaction is open and no connection held while the processor
// runs; the deliveries that reach the database at one moment share its short
// transactions (internal/groupcommit).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/groupcommit"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// writeTimeout bounds each short transaction: the one that takes leases
// and the one that writes outcomes. The writes of outcomes do not stop when
// the request is cancelled: the processor's side effects happened, and
// recording them spares a second run on redelivery. It fits within
// queue.LeaseMargin, so an outcome is written while its lease still holds.
const writeTimeout = queue.LeaseMargin

// Outcome is what Receive did with a valid delivery. Each is answered 200,
// with its Label.
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
	// Pinged: a destination's ping, recorded as its endpoint's last ping;
	// nothing ran.
	Pinged
	// TestDiscarded: a test-mode event through an endpoint whose test
	// events are discarded; its marker is committed, nothing ran.
	TestDiscarded
	// Held: a test-mode event through an endpoint whose test events are
	// queue-only, committed to the queue, unprocessed, for a person.
	Held
)

// Label is the outcome's name in the metrics, the activity counts and the
// answer's body.
func (o Outcome) Label() telemetry.Outcome {
	switch o {
	case Processed:
		return telemetry.OutcomeProcessed
	case Duplicate:
		return telemetry.OutcomeDuplicate
	case AlreadyQueued:
		return telemetry.OutcomeAlreadyQueued
	case Queued:
		return telemetry.OutcomeQueued
	case Deferred:
		return telemetry.OutcomeDeferred
	case Pinged:
		return telemetry.OutcomePinged
	case TestDiscarded:
		return telemetry.OutcomeTestDiscarded
	case Held:
		return telemetry.OutcomeHeld
	}
	return telemetry.Outcome(fmt.Sprintf("Outcome(%d)", int(o)))
}

func (o Outcome) String() string { return string(o.Label()) }

// Config configures a Receiver.
type Config struct {
	// Endpoints are the Stripe endpoints deliveries come through, each
	// with its signing secrets: the one whose secret a delivery's
	// signature matches is the one it came through. With none (and no
	// Secrets), Receive fails every delivery with ErrNoSecret.
	Endpoints []endpoint.Endpoint
	// Secrets, when Endpoints is empty, are the secrets (whsec_...) of one
	// endpoint labelled endpoint.DefaultLabel: more than one while a
	// secret is being rolled.
	Secrets []string
	// SnapshotAlias is what becomes of a thin v1.* event and the snapshot
	// event it mirrors. Default: DefaultSnapshotAlias.
	SnapshotAlias SnapshotAlias
	// Processor handles each new event. Default: worker.Discard.
	Processor worker.Processor
	// Fanout, when set, routes each new event to the destinations that
	// take it and delivers it to them in parallel, in place of Processor;
	// nil when hookd has one app (HOOKD_FORWARD_URL).
	Fanout *worker.Fanout
	// ProcessTimeout bounds the inline processor run. Default:
	// worker.DefaultProcessTimeout.
	ProcessTimeout time.Duration
	// Metrics, when set, records processing durations.
	Metrics *telemetry.Metrics
	// InlineConcurrency bounds the deliveries processed at once while
	// Stripe waits; a new event past it is deferred to the retry queue and
	// answered at once. Default: DefaultInlineConcurrency; negative: no
	// bound.
	InlineConcurrency int
	// Control, when set, holds delivery: while it says so, a new event is
	// queued unprocessed, as a deferred one is.
	Control *worker.Control
	// Pace, when set, bounds the deliveries to the app a second, shared
	// with every other path that delivers. An inline delivery that would
	// wait longer than paceWait for its turn is deferred.
	Pace *worker.Pace
	// Heartbeat, when set, keeps the leases live while the replica beats,
	// and cancels every processor run when it cannot (worker.Heartbeat).
	Heartbeat *worker.Heartbeat
	// Alone, when set, is the replica's, shared with the retry loop: while
	// a suspect runs alone on the replica, a new event is queued
	// unprocessed, as a deferred one is, and answered 200.
	Alone *worker.Alone
	// StallAfter is how long a group of deliveries at the database (one
	// waiting on a lock, say) holds up the deliveries that reach the
	// database behind it before they go on beside it. Default:
	// groupcommit.DefaultStallAfter.
	StallAfter time.Duration
	// Tracer, when set, traces each delivery (tracing.SpanDeliver) and its
	// steps; nil: no tracing.
	Tracer *tracing.Tracer
}

// Receiver runs the pipeline for one delivery from Stripe.
type Receiver struct {
	// stopped is done once Stop is called.
	stopped   context.Context
	stop      context.CancelFunc
	store     *queue.Store
	logger    *slog.Logger
	endpoints []endpoint.Endpoint
	alias     SnapshotAlias
	seen      seenEndpoints
	proc      worker.Processor
	fanout    *worker.Fanout
	timeout   time.Duration
	metrics   *telemetry.Metrics
	inline    inlineSlots
	control   *worker.Control
	pace      *worker.Pace
	heartbeat *worker.Heartbeat
	alone     *worker.Alone
	tracer    *tracing.Tracer
	// leases and outcomes gather the deliveries that reach the database at
	// one moment into one short transaction each: the leases and states of
	// those that just arrived, and the outcomes of those whose processors
	// ended, with their leases' release. The two run side by side: a
	// transaction that only takes leases commits without waiting for its
	// flush to disk, and the deliveries that just arrived never wait
	// behind the flush of the outcomes before them.
	leases   *groupcommit.Batcher[*delivery]
	outcomes *groupcommit.Batcher[*delivery]
}

// maxBatch bounds the deliveries of one short transaction: enough to take
// a burst on two cores in a handful of round trips, few enough that one
// statement's arrays stay small.
const maxBatch = 64

// New returns a Receiver over store. It logs at once when no secret is
// configured, since every delivery will then be refused.
func New(store *queue.Store, logger *slog.Logger, cfg Config) *Receiver {
	logger = logger.With("component", "receiver")
	eps := cfg.Endpoints
	if len(eps) == 0 && len(cfg.Secrets) > 0 {
		e := endpoint.New(endpoint.DefaultLabel)
		e.Secrets = cfg.Secrets
		eps = []endpoint.Endpoint{e}
	}
	if len(eps) == 0 {
		logger.Warn("no STRIPE_WEBHOOK_SECRET configured (nor STRIPE_WEBHOOK_SECRETS): every webhook is answered 503 until one is")
	}
	stopped, stop := context.WithCancel(context.Background())
	r := &Receiver{
		stopped:   stopped,
		stop:      stop,
		store:     store,
		logger:    logger,
		endpoints: eps,
		alias:     cmp.Or(cfg.SnapshotAlias, DefaultSnapshotAlias),
		seen:      newSeenEndpoints(),
		proc:      cmp.Or(cfg.Processor, worker.Discard),
		fanout:    cfg.Fanout,
		timeout:   cmp.Or(cfg.ProcessTimeout, worker.DefaultProcessTimeout),
		metrics:   cfg.Metrics,
		inline:    newInlineSlots(cmp.Or(cfg.InlineConcurrency, DefaultInlineConcurrency)),
		control:   cfg.Control,
		pace:      cfg.Pace,
		heartbeat: cfg.Heartbeat,
		alone:     cfg.Alone,
		tracer:    cfg.Tracer,
	}
	r.leases = groupcommit.New(maxBatch, r.exchange)
	r.outcomes = groupcommit.New(maxBatch, r.exchange)
	for _, b := range []*groupcommit.Batcher[*delivery]{r.leases, r.outcomes} {
		b.OnWaiting(cfg.Metrics.AddWaiting)
		b.StallAfter(cmp.Or(cfg.StallAfter, groupcommit.DefaultStallAfter))
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
	ctx, span := r.tracer.Start(ctx, tracing.SpanDeliver)
	defer span.End()
	// The signature check and the parse take microseconds, less than a
	// span of their own would cost: a refusal says itself on the
	// delivery's span.
	ep, err := r.verify(payload, sigHeader)
	var ev event
	if err == nil {
		err = parseEvent(payload, &ev)
	}
	if err != nil {
		traceRefusal(span, err)
		return 0, err
	}
	outcome, err := r.receive(ctx, &ev, ep, payload, sigHeader, queue.PathInline)
	traceOutcome(span, outcome, err)
	if err != nil {
		return 0, &EventError{EventID: ev.ID, Err: err}
	}
	return outcome, nil
}

// traceRefusal says on the delivery's span why the delivery was refused:
// the rejection log's reason, and the refusal's text, which names what was
// wrong and never holds a secret.
func traceRefusal(delivery trace.Span, err error) {
	if delivery.IsRecording() {
		tracing.Refuse(delivery, string(RejectReason(err)), err.Error())
	}
}

// traceOutcome sets what became of a delivery on its span: the outcome's
// label, as the metrics have it, or the error that Stripe is answered 503
// for.
func traceOutcome(span trace.Span, outcome Outcome, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case errors.Is(err, queue.ErrEventLocked):
		tracing.Outcome(span, string(telemetry.OutcomeLocked))
	case err != nil:
		tracing.Outcome(span, string(telemetry.OutcomeUnavailable))
		tracing.Fail(span, string(telemetry.OutcomeUnavailable), err.Error())
	default:
		tracing.Outcome(span, string(outcome.Label()))
	}
}

// RecoverThrough runs an event that Stripe's delivery never brought, read
// from Stripe's Events API, through the same pipeline as a delivery of the
// endpoint labelled label, which it is recorded as having come through: the
// event's lease, dedup, the processor, then the marker or the queue row.
// Its attempt is recorded with path reconcile, which is what tells a
// recovered event apart afterwards. There is no signature to verify: the
// payload came from Stripe's API, over TLS, read with hookd's own key.
//
// Its results are Receive's: queue.ErrEventLocked means a delivery of the
// event is being handled at this moment.
func (r *Receiver) RecoverThrough(ctx context.Context, label string, payload []byte) (Outcome, error) {
	ep, err := endpoint.Find(r.endpoints, label)
	if err != nil {
		if len(r.endpoints) > 0 || label != endpoint.DefaultLabel {
			return 0, err
		}
		ep = endpoint.New(endpoint.DefaultLabel)
	}
	var ev event
	if err := parseEvent(payload, &ev); err != nil {
		return 0, err
	}
	// A recovered event never reached hookd, so there is no delivery to
	// link to: the recovery is a trace of its own, linked to the
	// reconciliation run's span when the caller has one.
	// With several destinations it calls each that takes the event: a
	// span of no one destination.
	dest := queue.DefaultDestination
	if r.fanout != nil {
		dest = ""
	}
	ctx, span := r.tracer.StartProcess(ctx, dest, ev.ID, "", time.Time{})
	defer span.End()
	outcome, err := r.receive(ctx, &ev, &ep, payload, "", queue.PathReconcile)
	traceOutcome(span, outcome, err)
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

// delivery is one verified event on its way through the pipeline.
type delivery struct {
	ctx context.Context
	// ev is held by value: a delivery is on the heap anyway, and a pointer
	// to the caller's event would put that on the heap too.
	ev event
	// ep is the endpoint it came through.
	ep *endpoint.Endpoint
	// key is the id its lease, marker and queue row are under: the
	// event's, or with HOOKD_SNAPSHOT_ALIAS=dedup a thin event's
	// snapshot_event, so that the pair is one event.
	key       string
	payload   []byte
	sigHeader string
	path      queue.AttemptPath
	// deferred: no inline slot was free, delivery is held, or the app's
	// rate is reached, so the event is queued unprocessed, with this
	// reason.
	deferred string
	// turn is what the delivery's next turn at the database does.
	turn turn
	// span is the span of the delivery's turn at the database (its lease,
	// then its outcome); a non-recording span with tracing off.
	span trace.Span

	// Set by exchange: the event's state, and the lease when it is new.
	state    queue.DeliveryState
	owner    uuid.UUID
	deadline time.Time
	// interrupted is the path of a run of the event that started under
	// the lease this delivery took over and never reported.
	interrupted queue.AttemptPath
	// turns are the turns of its deliveries to ordered destinations
	// (orderKeys), taken with its lease.
	turns     []queue.OrderTurn
	orderKeys []queue.OrderKey
	// routes names the destinations that take the event, with the fan-out
	// on (Config.Fanout), and misses those whose filters failed on it.
	routes []string
	misses []queue.RouteMiss
	// The outcome to write, then whether it was written.
	outcome queue.Received
	written bool

	err error
}

// receive runs a verified event through the rest of the pipeline: one
// that runs no processor writes its marker without a lease; any other
// takes the event's lease with the deliveries that reach the database at
// the same moment, runs the processor with no transaction open, then
// writes the outcome with the lease's release, again with whoever is
// writing theirs at that moment. A delivery waits only for its own
// processor and for the short transactions it is part of.
func (r *Receiver) receive(ctx context.Context, ev *event, ep *endpoint.Endpoint, payload []byte, sigHeader string,
	path queue.AttemptPath) (Outcome, error) {
	if ev.ping() {
		return r.ping(ctx, ep)
	}
	d := &delivery{ctx: ctx, ev: *ev, ep: ep, key: r.keyOf(ev), payload: payload, sigHeader: sigHeader, path: path}
	r.route(d)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Event(ev.ID, ev.Type, ep.Label, 0, string(path))...)
	}
	if outcome, how, ok := r.markable(d); ok {
		if got, done, err := r.mark(d, outcome, how); done || err != nil {
			return got, err
		}
		// A lease is on the event: the leased way finds out what it is.
	}
	if path == queue.PathInline {
		// The inline slots bound the deliveries waiting for the app while
		// Stripe waits. A recovery has no one waiting and its own bound,
		// like the retry loop: reconcile processes a few events at a time.
		release, ok := r.inline.tryAcquire()
		if ok {
			defer release()
		} else {
			d.deferred = r.deferReason()
		}
	}
	if d.deferred == "" {
		// Nothing starts while a suspect runs alone on this replica.
		if !r.alone.Enter() {
			d.deferred = aloneReason
		} else {
			defer r.alone.Leave()
		}
	}
	return r.leased(d)
}

// aloneReason is why a delivery is queued unprocessed while a suspect
// runs alone on its replica.
const aloneReason = "deferred to the retry queue: this replica is running an event alone after a crash " +
	"(a suspect), with nothing else in flight"

// leased takes d's lease and, when its event is new, runs it and writes
// its outcome with the lease's release.
func (r *Receiver) leased(d *delivery) (Outcome, error) {
	_, d.span = r.tracer.Start(d.ctx, tracing.SpanLease)
	r.leases.Do(d)
	d.span.End()
	if d.err != nil {
		return 0, d.err
	}
	switch d.state {
	case queue.DeliveryBusy:
		return 0, queue.ErrEventLocked
	case queue.DeliveryUngranted:
		return r.queueUngranted(d)
	case queue.DeliveryProcessed:
		return Duplicate, r.linkSecond(d)
	case queue.DeliveryQueued:
		return AlreadyQueued, r.linkSecond(d)
	}

	outcome, res := r.run(d)
	d.turn = turnSettle
	if d.outcome.Queue != nil || d.outcome.Fanout != nil && len(d.outcome.Fanout.Queue) > 0 {
		// The event goes on the queue for later: the outcome is the
		// PRODUCER span, whose context the queue row keeps for the
		// attempts that take it from there to link to.
		var sent context.Context
		sent, d.span = r.tracer.StartSend(d.ctx, d.ev.ID)
		d.setTraceParent(r.tracer.Parent(sent))
	} else {
		_, d.span = r.tracer.Start(d.ctx, tracing.SpanOutcome)
	}
	r.outcomes.Do(d)
	d.span.End()
	switch {
	case d.err != nil:
		// Stripe is told 503 and delivers again; meanwhile the outcome is
		// written as soon as the database takes it, so that redelivery
		// finds it instead of running the processor a second time.
		go r.settleLater(d)
		return 0, d.err
	case !d.written:
		return 0, queue.ErrLeaseLost
	}
	switch outcome {
	case Deferred:
		r.logger.InfoContext(d.ctx, "event deferred to the retry queue", "event_id", d.ev.ID,
			"event_type", d.ev.Type, "reason", d.deferred)
	case Queued:
		r.logger.WarnContext(d.ctx, "event queued for retry", "event_id", d.ev.ID,
			"event_type", d.ev.Type, "err", res.Err)
	}
	return outcome, nil
}

// ungrantedReason is the last_error of an event queued while no lease
// could be granted.
const ungrantedReason = "deferred: no lease could be granted when it arrived (the database had lost its leases " +
	"moments before, after a crash or a failover, or this replica was fenced), so the retry loop delivers it"

// queueUngranted answers a delivery that no lease could be granted to: an
// event the database has never seen is queued, durably and unprocessed,
// and answered 200 (Deferred); the retry loop runs it once leases are
// granted again. Only an event that has a lease on it is answered 503.
func (r *Receiver) queueUngranted(d *delivery) (Outcome, error) {
	fe := failedEvent(d, ungrantedReason)
	outcome := Deferred
	if d.testEvents() == endpoint.QueueTestEvents {
		fe.Held, outcome = true, Held
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), writeTimeout)
	defer cancel()
	first, more := r.deliveriesOf(d, fe)
	st, err := r.store.QueueUngranted(ctx, first, more...)
	switch {
	case err != nil:
		return 0, err
	case st == queue.DeliveryQueuedUngranted:
		r.logger.InfoContext(d.ctx, "event deferred to the retry queue", "event_id", d.ev.ID,
			"event_type", d.ev.Type, "reason", ungrantedReason)
		return outcome, nil
	case st == queue.DeliveryProcessed:
		return Duplicate, nil
	case st == queue.DeliveryQueued:
		return AlreadyQueued, nil
	}
	return 0, queue.ErrNotGranted
}

// run processes a leased new event, unless it is deferred, and sets the
// outcome to write.
func (r *Receiver) run(d *delivery) (Outcome, worker.Result) {
	d.outcome = queue.Received{EventID: d.key, Owner: d.owner, Seen: r.seen.note(d.ep.Label, &d.ev),
		Pair: r.pairOf(d), RouteMisses: d.misses}
	if outcome, ok := r.testModeOutcome(d); ok {
		return outcome, worker.Result{}
	}
	if d.interrupted != "" {
		// A run of the event started and hookd never heard back: the
		// process died, maybe because of this event, maybe beside it. It
		// is a suspect: never run inline again, it goes on the retry
		// queue charged nothing and runs alone there.
		r.queueFor(d, failedEvent(d, queue.SuspectError))
		d.outcome.Suspect = d.interrupted
		return Queued, worker.Result{Err: errors.New(queue.SuspectError)}
	}
	if d.deferred == "" {
		d.deferred = r.holdReason(d.ctx)
	}
	if d.deferred != "" {
		r.queueFor(d, failedEvent(d, d.deferred))
		return Deferred, worker.Result{}
	}
	if r.fanout != nil {
		return r.deliverAll(d)
	}
	res, took := r.process(d)
	return r.processed(d, res, took), res
}

// testModeOutcome is the outcome of a test-mode event whose endpoint does
// not forward test events: discarded, or held on the queue for a person.
func (r *Receiver) testModeOutcome(d *delivery) (Outcome, bool) {
	switch d.testEvents() {
	case endpoint.DiscardTestEvents:
		d.outcome.Log = logged(d, queue.LogTestDiscarded)
		return TestDiscarded, true
	case endpoint.QueueTestEvents:
		fe := failedEvent(d, fmt.Sprintf("a test-mode event held on the queue: endpoint %q's test events are queue-only; "+
			"retry it to forward it", d.ep.Label))
		fe.Held = true
		r.queueFor(d, fe)
		return Held, true
	}
	return 0, false
}

// testEvents is what d's endpoint does with it as a test-mode event;
// empty for a live-mode one.
func (d *delivery) testEvents() endpoint.TestEvents {
	if d.ev.mode != modeTest {
		return ""
	}
	return d.ep.TestEvents
}

// process runs the processor on a leased event, unless it skips the
// event, bound to the heartbeat and ending before the lease does.
func (r *Receiver) process(d *delivery) (worker.Result, time.Duration) {
	if worker.Skips(r.proc, d.ev.Type) {
		return worker.Result{}, 0
	}
	// The lease outlasts this deadline, so no other run of the event can
	// start before this one has ended.
	ctx, unbind := r.heartbeat.Bind(d.ctx)
	defer unbind()
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()
	res, took := worker.Process(ctx, r.proc, r.timeout, worker.Delivery{
		EventID: d.key, EventType: d.ev.Type, Payload: d.payload, Attempt: 0,
		Endpoint: d.ep.Label, Livemode: d.ev.livemode(), Account: d.ev.account,
	})
	// The breaker hears of calls to the app only: a run the fence or a
	// stop cut short says nothing of whether the app is up.
	d.outcome.Called = res.Err == nil || ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded)
	return res, took
}

// processed sets the outcome of a processor run: the marker of a success,
// or the queue row and attempt of a failure.
func (r *Receiver) processed(d *delivery, res worker.Result, took time.Duration) Outcome {
	r.metrics.ObserveDelivery(queue.DefaultDestination, d.path, res.Err == nil, took)
	attempt := queue.NewAttempt{
		Source: queue.SourceStripe, EventID: d.key, Duration: took,
		Succeeded: res.Err == nil, HTTPStatus: res.HTTPStatus, Path: d.path,
		AppDown: worker.IsAppDown(res.Err), TraceID: tracing.TraceID(d.ctx),
	}
	switch {
	case attempt.Succeeded && d.path == queue.PathInline:
		// Processed on its first delivery: the marker, with the event
		// log's columns, is its whole record.
		d.outcome.Log = logged(d, queue.LogInline)
		return Processed
	case attempt.Succeeded:
		// Recovered by reconciliation: its attempt is what says so, since
		// a marker alone means a first delivery.
		d.outcome.Attempt, d.outcome.Log = &attempt, logged(d, queue.LogReconcile)
		return Processed
	}
	// Failed: from here on the event keeps its history, starting with this
	// attempt.
	attempt.Error = worker.ErrorText(res.Err)
	tracing.FailApp(trace.SpanFromContext(d.ctx), res.HTTPStatus, worker.FailureClass(res))
	fe := failedEvent(d, attempt.Error)
	d.outcome.Queue, d.outcome.Wait, d.outcome.Attempt = &fe, r.store.RetryDelay(0), &attempt
	return Queued
}

// exchange writes the outcomes of the deliveries of a batch that settle or
// mark, and takes the leases and reads the states of the others, in one
// short transaction (a batch of r.leases holds only the latter, one of
// r.outcomes only the former). A delivery whose sender hung up before its
// lease was taken is answered without one: Stripe delivers again. When the
// transaction fails, each delivery is tried alone, so that one event's bad
// or stuck write never changes another's outcome: each gets the error of
// its own.
func (r *Receiver) exchange(batch []*delivery) {
	live := batch[:0:0]
	takes := 0
	for _, d := range batch {
		switch {
		case d.turn == turnSettle:
			live = append(live, d)
		case d.ctx.Err() != nil:
			d.err = d.ctx.Err()
		default:
			live = append(live, d)
			if d.turn == turnTake {
				takes++
			}
		}
	}
	if takes > 0 {
		r.metrics.ObserveBatch(takes)
	}
	if len(live) == 0 {
		return
	}
	// No one delivery's cancellation ends the transaction of all, and
	// outcomes are written even when their request is gone: the
	// processor's side effects happened, and recording them spares a
	// second run on redelivery.
	groupcommit.EachAlone(live, writeTimeout, r.exchangeGroup, func(d *delivery, err error) { d.err = err })
}

func (r *Receiver) exchangeGroup(ctx context.Context, group []*delivery) error {
	// The group's statements are child spans of its first traced
	// delivery's lease or outcome.
	ctx = tracing.Group(ctx, group, func(d *delivery) trace.Span { return d.span })
	// While the heartbeat's own beats are late, the exchange carries one:
	// the leases it takes are then granted on a beat the heartbeat knows
	// of, so their runs are not cancelled as they start by a fence the
	// database has not seen yet.
	x := queue.Exchange{Source: queue.SourceStripe, ProcessFor: r.timeout, Beat: r.heartbeat.Overdue()}
	sent := r.heartbeat.Now()
	for _, d := range group {
		switch d.turn {
		case turnSettle:
			x.Settle = append(x.Settle, d.outcome)
		case turnMark:
			x.Mark = append(x.Mark, d.outcome)
		default:
			x.Take = append(x.Take, queue.Delivery{EventID: d.key, Path: d.path, Runs: d.deferred == "", Turns: d.orderKeys})
		}
	}
	got, err := r.store.Exchange(ctx, x)
	if err != nil {
		return err
	}
	if got.Beaten {
		r.heartbeat.Beaten(sent)
	}
	var settled, marked, taken int
	for _, d := range group {
		switch d.turn {
		case turnSettle:
			d.written = got.Written[settled]
			settled++
		case turnMark:
			d.state = got.Marked[marked]
			marked++
		default:
			d.state, d.owner, d.deadline = got.Taken.States[taken], got.Taken.Owner, got.Taken.Deadline
			d.interrupted = got.Taken.Interrupted[taken]
			if got.Taken.Turns != nil {
				d.turns = got.Taken.Turns[taken]
			}
			taken++
		}
	}
	return nil
}

// settleLater writes the outcome of a delivery whose write failed, trying
// again until its lease has expired: a write after that could only find
// the lease taken over (and write nothing), or free (and write what is
// still true).
func (r *Receiver) settleLater(d *delivery) {
	err := retryUntil(r.stopped, d.deadline.Add(queue.LeaseMargin), func(ctx context.Context) error {
		written, err := r.store.SettleDeliveries(ctx, []queue.Received{d.outcome})
		if err == nil && !written[0] {
			return nil // released already, or taken over: nothing left to write
		}
		return err
	})
	if err != nil {
		r.logger.Warn("an event's outcome could not be written before its lease expired: its next delivery runs it again",
			"event_id", d.ev.ID, "err", err)
		return
	}
	r.logger.Info("an event's outcome was written after its delivery was answered 503", "event_id", d.ev.ID)
}

// retryUntil calls try until it succeeds or until passes, waiting a little
// longer after each failure, and returns try's last error.
// It gives up when stopped is done.
func retryUntil(stopped context.Context, until time.Time, try func(context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-stopped.Done():
			timer.Stop()
			return stopped.Err()
		}
		ctx, cancel := context.WithDeadline(stopped, until)
		err := try(ctx)
		cancel()
		if err == nil || stopped.Err() != nil || time.Now().Add(wait).After(until) {
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Stop gives up the outcomes still being written again after a failed
// write (settleLater): hookd closes its pool after them at a stop, and a
// write blocked on a database that does not answer (a frozen primary)
// would hold the pool, and hookd's exit, until its lease expired. Each
// such event's next delivery runs it again, as it would after a crash.
func (r *Receiver) Stop() { r.stop() }

// logged is d as its marker's event log columns keep it, processed how.
// A queued event needs none: its queue row is its entry.
func logged(d *delivery, how queue.LogHow) *queue.LoggedEvent {
	return &queue.LoggedEvent{EventType: d.ev.Type, Payload: d.payload, Meta: d.ev.meta(d.ep.Label),
		Created: d.ev.created(), How: how}
}

// failedEvent is d as the retry queue keeps it, with why it is there.
func failedEvent(d *delivery, reason string) queue.FailedEvent {
	return queue.FailedEvent{
		Source: queue.SourceStripe, EventID: d.key, EventType: d.ev.Type,
		Payload: d.payload, Signature: storedSignature(d.sigHeader), Error: reason, Created: d.ev.created(),
		Meta: d.ev.meta(d.ep.Label),
	}
}

// storedSignature is the part of a verified Stripe-Signature header that
// Stripe's scheme defines, as the queue row keeps it: the t=, v1= and v0=
// elements whose values have the scheme's shape. Anything else a sender
// appended (the header still verifies with extra elements) is dropped, so
// what is stored is always valid text.
func storedSignature(header string) string {
	var b strings.Builder
	for key, value := range stripeevent.SignatureElements(header) {
		if value == "" {
			continue
		}
		switch key {
		case "t":
			if strings.Trim(value, "0123456789") != "" {
				continue
			}
		case "v1", "v0":
			if strings.Trim(value, "0123456789abcdefABCDEF") != "" {
				continue
			}
		default:
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(value)
	}
	return b.String()
}
