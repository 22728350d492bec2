// Package worker runs the loops that work the queue: the retry loop
// (Retrier) and the replay runner (Replayer), on one producer that claims
// leased work, runs a Processor on it and settles it. It holds the Processor
// interface and the forwarder that posts an event to the user's app, and what
// every delivering path shares: the Heartbeat, delivery control (Control) and
// the delivery rate (Pace).
package worker

// Each long-running loop runs on internal/startstop. The receiver,
// which runs a delivery while Stripe waits, is internal/receiver; what is
// counted and logged of them is internal/telemetry.
//
// Its guarantee: at most one processor runs per event id at any time,
// across the receiver, the retry loop and any number of replicas: every run
// holds the event's lease (a row of webhook_leases), and its outcome (the
// dedup marker, or the queue row and the attempt) is written only with that
// lease's release, by its owner. No transaction is open while a processor
// runs.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Delivery is one event handed to a Processor.
type Delivery struct {
	EventID   string
	EventType string
	// Payload is the exact body Stripe sent, byte for byte.
	Payload []byte
	// Attempt is 0 for the inline attempt while Stripe waits, then the
	// number of the retry.
	Attempt int
	// Endpoint is the label of the endpoint the event came through.
	Endpoint string
	// Livemode is the event's livemode, nil when it did not say; read
	// only.
	Livemode *bool
	// Account is a Connect event's connected account; "" for none.
	Account string
	// Replay is the name of the replay delivering the event again; "" for
	// every other delivery.
	Replay string
	// Destination is the destination this call is for, when the event's
	// deliveries go to several (Fanout); "" when hookd has one app, or
	// for a replay, which goes to every destination that takes the event.
	Destination string
}

// Result is what a Processor made of a Delivery.
type Result struct {
	// Err is nil when the event was processed; otherwise it is why not, and
	// its text becomes the queue row's last_error.
	Err error
	// HTTPStatus is the status the processor's downstream answered, for the
	// attempt history; 0 when it made no HTTP call or got no answer.
	HTTPStatus int
}

// Processor handles an event. hookd guarantees that Process never runs
// twice at the same time for one event id, and that a successful run is
// followed by no other unless the outcome failed to commit; it may still run
// again after a failure or a crash, so it should be idempotent.
type Processor interface {
	Process(ctx context.Context, d Delivery) Result
}

// ProcessorFunc adapts a function to a Processor, for in-process handlers
// and tests.
type ProcessorFunc func(ctx context.Context, d Delivery) Result

// Process calls f.
func (f ProcessorFunc) Process(ctx context.Context, d Delivery) Result { return f(ctx, d) }

// Discard is the Processor of HOOKD_PROCESSOR=discard: it accepts every
// event, so each is marked processed and its redeliveries are dropped.
var Discard Processor = discard{}

type discard struct{}

func (discard) Process(context.Context, Delivery) Result { return Result{} }

func (discard) Skips(string) bool { return true }

// A Skipper is a Processor that knows, before any run, that it would do
// nothing with some events and accept them: Discard does with every event.
// Such an event is marked processed without a run, and so without a lease:
// a lease keeps a processor run to one at a time, and with no run there is
// nothing to keep. A Processor that wraps another is a Skipper when the one
// it wraps is, for the events it hands on untouched.
type Skipper interface {
	Skips(eventType string) bool
}

// Skips reports whether p would do nothing with an event of eventType.
func Skips(p Processor, eventType string) bool {
	s, ok := p.(Skipper)
	return ok && s.Skips(eventType)
}

// DefaultProcessTimeout bounds one processor run unless configured: it is
// HOOKD_FORWARD_TIMEOUT's default, well within the time Stripe waits for
// an answer.
const DefaultProcessTimeout = 10 * time.Second

// Process runs p with a timeout and turns a panic into a failed Result, so a
// faulty in-process handler fails its event instead of the whole process.
// It is how the receiver and the retry loop run a processor.
func Process(ctx context.Context, p Processor, timeout time.Duration, d Delivery) (res Result, took time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		took = time.Since(start)
		if r := recover(); r != nil {
			res = Result{Err: fmt.Errorf("%w: %v", errPanicked, r)}
		}
	}()
	return p.Process(ctx, d), 0
}

// errPanicked is the error of a processor run that panicked.
var errPanicked = errors.New("processor panicked")

// maxErrorText bounds the error text stored per attempt and queue row.
const maxErrorText = 2000

// ErrorText is err's text as PostgreSQL can store it in a text column:
// valid UTF-8, without NUL bytes (which text rejects, and which a failing
// downstream may well send), and bounded: the last error of an attempt and
// of a queue row.
func ErrorText(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	s = cutText(s, maxErrorText)
	if s == "" {
		s = "processing failed"
	}
	return s
}
