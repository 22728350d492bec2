package actions

import (
	"context"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// DeadRetry is what a retry of the dead events a filter selects did, or,
// in a dry run, would do: Selected is how many dead events the filter
// selects; Queued how many went back to the queue and Erased how many
// stayed dead because their payloads were erased (both 0 in a dry run).
type DeadRetry struct {
	Filter   queue.EventFilter
	DryRun   bool
	Selected int64
	queue.RetriedDead
}

// RetryDead sends every dead event f selects (its Status is ignored) back
// to the queue, in one statement in one transaction with its audit entry;
// dryRun counts them and changes nothing.
func (a *Actions) RetryDead(ctx context.Context, who Actor, f queue.EventFilter, dryRun bool) (DeadRetry, error) {
	f.Status = queue.StatusDead
	r := DeadRetry{Filter: f, DryRun: dryRun}
	if dryRun {
		var err error
		r.Selected, err = a.reads.CountEvents(ctx, f)
		return r, err
	}
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if r.RetriedDead, err = tx.RetryDeadMatching(ctx, f); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.RetryAll, DeadFilterText(f), r.Queued)
	})
	r.Selected = r.Queued + r.Erased
	return r, err
}

// DeadFilterText says which dead events f selects, as the audit log
// records a bulk retry.
func DeadFilterText(f queue.EventFilter) string {
	if filter := views.DescribeFilter(f); filter != "" {
		return "dead events with " + filter
	}
	return "all dead events"
}
