package actions

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// MaxFailureGroups bounds a list of failure groups. Masking keeps the
// number of groups small; if an error text defeats it, every event becomes
// a group of its own, and the list has the largest ones rather than all.
const MaxFailureGroups = 200

// FailureGroups reads the queue's failure groups, the largest first, at
// most limit of them, and how many there are in all; eventType, when not
// "", keeps only the events of that type, and destination, when not "",
// the deliveries to that destination.
func (a *Actions) FailureGroups(ctx context.Context, eventType, destination string, limit int) ([]queue.FailureGroup, int64, error) {
	if limit <= 0 || limit > MaxFailureGroups {
		limit = MaxFailureGroups
	}
	return a.reads.FailureGroups(ctx, limit, strings.TrimSpace(eventType), strings.TrimSpace(destination))
}

// GroupRetry is what a retry of a failure group did, or, for a dry run,
// would do.
type GroupRetry struct {
	// Group is the group retried; on a dry run with its event types.
	Group  queue.FailureGroup
	DryRun bool
	// Dead and Pending are, on a dry run, how many of the group's events
	// are dead (erased ones included, which a retry leaves dead) and
	// pending.
	Dead, Pending int64
	// Revived and Hastened are what the retry did to the dead events and
	// to the pending ones.
	Revived  queue.RetriedDead
	Hastened queue.Hastened
}

// Count is how many events the retry sent for an attempt, or, on a dry
// run, how many it would at most.
func (r GroupRetry) Count() int64 {
	if r.DryRun {
		return r.Dead + r.Pending
	}
	return r.Revived.Queued + r.Hastened.Total()
}

// RetryGroup sends every event of the failure group g for an attempt now,
// the way a person's retry of one event does: dead events go back on the
// queue with their attempts starting over (erased ones stay dead), pending
// ones become due. It is one transaction with its audit entry; the retry
// loop then runs each event under its lock, after the dedup check. A dry
// run changes nothing and counts the group's events instead.
func (a *Actions) RetryGroup(ctx context.Context, who Actor, g queue.FailureGroup, dryRun bool) (GroupRetry, error) {
	g.EventType, g.Destination = strings.TrimSpace(g.EventType), strings.TrimSpace(g.Destination)
	if strings.TrimSpace(g.ErrorGroup) == "" {
		// An empty group would widen the retry to every event on the queue.
		return GroupRetry{}, &InvalidError{Field: "group", Detail: "Which failure group? Give the group's error, " +
			"as the list of failure groups has it."}
	}
	if dryRun {
		return a.previewGroupRetry(ctx, g)
	}
	r := GroupRetry{Group: g}
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		// Pending first: the dead ones, once sent back, are pending too
		// and would be counted twice.
		var err error
		if r.Hastened, err = tx.RetryNowMatching(ctx, g.Filter(queue.StatusPending)); err != nil {
			return err
		}
		if r.Revived, err = tx.RetryDeadMatching(ctx, g.Filter(queue.StatusDead)); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.RetryGroup,
			views.DescribeFilter(g.Filter(queue.StatusDead)), r.Count())
	})
	if err != nil {
		return GroupRetry{}, err
	}
	return r, nil
}

// previewGroupRetry counts the events a retry of g would send, and finds
// the group's event types.
func (a *Actions) previewGroupRetry(ctx context.Context, g queue.FailureGroup) (GroupRetry, error) {
	r := GroupRetry{Group: g, DryRun: true}
	var err error
	if r.Dead, err = a.reads.CountEvents(ctx, g.Filter(queue.StatusDead)); err != nil {
		return GroupRetry{}, err
	}
	if r.Pending, err = a.reads.CountEvents(ctx, g.Filter(queue.StatusPending)); err != nil {
		return GroupRetry{}, err
	}
	groups, _, err := a.reads.FailureGroups(ctx, MaxFailureGroups, g.EventType, g.Destination)
	if err != nil {
		return GroupRetry{}, err
	}
	for _, found := range groups {
		if found.ErrorGroup == g.ErrorGroup && (g.Destination == "" || found.Destination == g.Destination) {
			r.Group.Types = mergeTypes(r.Group.Types, found.Types)
		}
	}
	return r, nil
}

// mergeTypes adds the counts of more to types, most first: a group of
// every destination's is one group of each.
func mergeTypes(types, more []queue.TypeCount) []queue.TypeCount {
	if len(types) == 0 {
		return more
	}
	out := slices.Clone(types)
	for _, m := range more {
		i := slices.IndexFunc(out, func(t queue.TypeCount) bool { return t.EventType == m.EventType })
		if i < 0 {
			out = append(out, m)
			continue
		}
		out[i].Count += m.Count
	}
	slices.SortStableFunc(out, func(a, b queue.TypeCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.EventType, b.EventType))
	})
	return out
}
