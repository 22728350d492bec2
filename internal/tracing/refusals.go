package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// RefusalEvery is how often a refused delivery's spans are exported: the
// first refusal's, then at most one refusal's in each such span of time,
// six a minute. Refusals are the receiver's cheapest answers and the ones
// a stranger can send by the thousand: traced each, an unsigned flood
// made three spans a POST, two of them errors, which filled the export
// queue (2,048 spans) and dropped the real deliveries' spans with them,
// and ran up a per-span bill. The rejection log and the metrics count
// every refusal; the trace of one in ten seconds shows what they look
// like.
const RefusalEvery = 10 * time.Second

// refusalFilter passes ended spans on to next, but for those of refused
// deliveries beyond one every every. A refused delivery is the trace of a
// span that ends with an error status and AttrRefusal (Refuse): the
// delivery's, the first of its spans to end, or the server span alone when
// the body was refused before it was verified. The decision holds for the
// trace's spans that end after it, until its local root ends.
type refusalFilter struct {
	next  sdktrace.SpanProcessor
	every time.Duration

	// open counts the refused traces whose local root has not ended yet:
	// while it is 0, a span that ends without an error passes at the cost
	// of one atomic load.
	open atomic.Int64
	mu   sync.Mutex
	last time.Time
	// kept says, for each refused trace whose local root has not ended,
	// whether its spans are exported.
	kept map[trace.TraceID]bool
}

func newRefusalFilter(next sdktrace.SpanProcessor, every time.Duration) *refusalFilter {
	return &refusalFilter{next: next, every: every, kept: map[trace.TraceID]bool{}}
}

func (f *refusalFilter) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	f.next.OnStart(ctx, s)
}

func (f *refusalFilter) OnEnd(s sdktrace.ReadOnlySpan) {
	if f.open.Load() == 0 && s.Status().Code != codes.Error {
		f.next.OnEnd(s)
		return
	}
	id := s.SpanContext().TraceID()
	parent := s.Parent()
	root := !parent.IsValid() || parent.IsRemote()
	f.mu.Lock()
	keep, refused := f.kept[id]
	if !refused && s.Status().Code == codes.Error && hasRefusal(s) {
		refused = true
		now := time.Now()
		if keep = f.last.IsZero() || now.Sub(f.last) >= f.every; keep {
			f.last = now
		}
		if !root {
			f.kept[id] = keep
			f.open.Add(1)
		}
	} else if refused && root {
		delete(f.kept, id)
		f.open.Add(-1)
	}
	f.mu.Unlock()
	if refused && !keep {
		return
	}
	f.next.OnEnd(s)
}

func hasRefusal(s sdktrace.ReadOnlySpan) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == AttrRefusal {
			return true
		}
	}
	return false
}

func (f *refusalFilter) Shutdown(ctx context.Context) error   { return f.next.Shutdown(ctx) }
func (f *refusalFilter) ForceFlush(ctx context.Context) error { return f.next.ForceFlush(ctx) }
