package receiver

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/queue"
)

// SnapshotAlias is what becomes of a thin v1.* event and the snapshot
// event it mirrors (its snapshot_event), which reach hookd through two
// endpoints while an app moves from one kind to the other: both record
// the same change.
type SnapshotAlias string

const (
	// ForwardBoth forwards each of the pair as an event of its own: an app
	// midway through the move may want both.
	ForwardBoth SnapshotAlias = "forward-both"
	// DedupAlias makes the pair one event, under the snapshot event's id:
	// the first of the two to arrive is forwarded, and the second is
	// answered 200 as its duplicate. Its lease, marker and queue row are
	// under that id, so the two never run at once, whichever comes first
	// and however close together; the app's Hookd-Event-Id is that id too.
	DedupAlias SnapshotAlias = "dedup"
)

// DefaultSnapshotAlias is HOOKD_SNAPSHOT_ALIAS's default.
const DefaultSnapshotAlias = ForwardBoth

// ParseSnapshotAlias reads forward-both or dedup.
func ParseSnapshotAlias(v string) (SnapshotAlias, error) {
	switch a := SnapshotAlias(v); a {
	case ForwardBoth, DedupAlias:
		return a, nil
	}
	return "", fmt.Errorf("forward-both or dedup, got %q", v)
}

// keyOf is the id ev's lease, marker and queue row are under.
func (r *Receiver) keyOf(ev *event) string {
	if r.alias == DedupAlias && ev.snapshot != "" {
		return ev.snapshot
	}
	return ev.ID
}

// pairOf is the link the outcome of d writes when d is the thin event of
// a pair: with dedup it ran first, so it is the one forwarded.
func (r *Receiver) pairOf(d *delivery) *queue.Pair {
	if d.ev.snapshot == "" {
		return nil
	}
	forwarded := queue.ForwardedBoth
	if r.alias == DedupAlias {
		forwarded = queue.ForwardedThin
	}
	return &queue.Pair{ThinEventID: d.ev.ID, SnapshotEventID: d.ev.snapshot, Endpoint: d.ep.Label, Forwarded: forwarded}
}

// linkSecond records, with dedup, that the thin event of a pair arrived
// after its snapshot event had been processed or queued: it is answered as
// the snapshot event's duplicate. A redelivery of a thin event that came
// first finds its link already made, which stays.
func (r *Receiver) linkSecond(d *delivery) error {
	if r.alias != DedupAlias || d.ev.snapshot == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), writeTimeout)
	defer cancel()
	return r.store.LinkPair(ctx, queue.Pair{ThinEventID: d.ev.ID, SnapshotEventID: d.ev.snapshot,
		Endpoint: d.ep.Label, Forwarded: queue.ForwardedSnapshot})
}

// ping records a destination's ping as its endpoint's last: the answer is
// 200 once it is written.
func (r *Receiver) ping(ctx context.Context, ep *endpoint.Endpoint) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := r.store.RecordPing(ctx, ep.Label); err != nil {
		return 0, err
	}
	r.logger.InfoContext(ctx, "endpoint pinged", "endpoint", ep.Label)
	return Pinged, nil
}
