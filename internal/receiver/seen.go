package receiver

import (
	"sync"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
)

// seenEvery is how often, at most, one replica moves an endpoint's (and
// account's) last event in endpoint_activity: the quiet-endpoint alert
// counts hours and reconciliation a window of days, so a second late is
// nothing, and one row written by every group commit would be a hot row
// all replicas' commits wait on.
const seenEvery = time.Second

// maxSeen bounds the endpoints and accounts remembered: a Connect
// platform may have many accounts. Past it the memory starts over, which
// only writes each one once more.
const maxSeen = 10_000

// seenEndpoints remembers when this replica last wrote each endpoint's and
// account's last event, thin or snapshot, so that the write rides with the outcome of the
// first delivery in each seenEvery, never in a round trip of its own.
type seenEndpoints struct {
	mu      sync.Mutex
	written map[queue.Seen]time.Time
}

func newSeenEndpoints() seenEndpoints {
	return seenEndpoints{written: map[queue.Seen]time.Time{}}
}

// note returns the Seen for an outcome of ev through the endpoint labelled
// label to write, or nil when this replica wrote it less than seenEvery
// ago, or when ev is a generation-failure notice: that is Stripe's word
// about itself, not an event of the endpoint's stream, so like a ping it
// teaches an endpoint no kind and contradicts no declaration (a notice
// signed by hand with a snapshot endpoint's secret would otherwise mark
// that endpoint as receiving thin events for endpoint.ArrivedWindow).
func (s *seenEndpoints) note(label string, ev *event) *queue.Seen {
	if ev.Type == stripeevent.GenerationFailureType {
		return nil
	}
	k := queue.Seen{Endpoint: label, Account: ev.account, Thin: ev.thin}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.written[k]; ok && now.Sub(last) < seenEvery {
		return nil
	}
	if len(s.written) >= maxSeen {
		clear(s.written)
	}
	s.written[k] = now
	return &k
}
