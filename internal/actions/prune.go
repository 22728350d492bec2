package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker/maintenance"
)

// MinPruneDays is Stripe's redelivery window in days: a marker pruned
// sooner lets a redelivery of its event be processed again.
const MinPruneDays = int(maintenance.MinMarkerRetention / (24 * time.Hour))

// maxPruneDays bounds the days: beyond it, days*24h overflows a
// time.Duration, and nothing is that old.
const maxPruneDays = 100_000

// Pruned is what a prune of the redelivery guard did, or in a dry run
// would do: Removed is how many event ids older than Days it removed, or
// would remove.
type Pruned struct {
	Days    int
	DryRun  bool
	Removed int64
}

// CheckPruneDays refuses days below MinPruneDays.
func CheckPruneDays(days int) error {
	if days < MinPruneDays {
		return &InvalidError{Field: "days", Detail: fmt.Sprintf("Days must be a whole number, at least %d: Stripe redelivers "+
			"an event for up to %d days, and a redelivery whose id was pruned would be delivered again.", MinPruneDays, MinPruneDays)}
	}
	return nil
}

// Prune removes the redelivery guard's event ids older than days, and
// audits it; dryRun counts them and changes nothing. One transaction for
// the prune and its audit entry: on a very large prune that is one long
// transaction rather than the pruner's short batches, the price of never
// losing the record of it.
func (a *Actions) Prune(ctx context.Context, who Actor, days int, dryRun bool) (Pruned, error) {
	if err := CheckPruneDays(days); err != nil {
		return Pruned{}, err
	}
	p := Pruned{Days: min(days, maxPruneDays), DryRun: dryRun}
	age := time.Duration(p.Days) * 24 * time.Hour
	if dryRun {
		var err error
		p.Removed, err = a.reads.CountPrunable(ctx, age)
		return p, err
	}
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if p.Removed, err = tx.PruneProcessed(ctx, age); err != nil {
			return err
		}
		if err := tx.RecordPrune(ctx, p.Removed); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.Prune,
			"redelivery guard ids older than "+DaysText(p.Days), p.Removed)
	})
	return p, err
}

// DaysText is always plural, "1 days" included: the confirmation, the
// flash and the audit log keep one fixed wording that tests and people
// can search for.
func DaysText(days int) string {
	return views.Count(int64(days)) + " days"
}
