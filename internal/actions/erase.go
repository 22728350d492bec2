package actions

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// Erase erases the event log's payloads of every event about customer
// (cus_...), for a GDPR request, their metadata kept with when and by
// whom, and audits it in the same transaction.
func (a *Actions) Erase(ctx context.Context, who Actor, customer string) (queue.Erased, error) {
	if err := queue.CheckCustomerID(customer); err != nil {
		return queue.Erased{}, &InvalidError{Field: "customer", Detail: fmt.Sprintf("Nothing erased: %v.", err)}
	}
	var erased queue.Erased
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if erased, err = tx.EraseCustomer(ctx, customer, who.Name()); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.Erase, customer, erased.Payloads)
	})
	return erased, err
}
