package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// eraseCommand runs `hookd erase -customer cus_...`, for a GDPR request:
// the event log's payloads of every event about the customer are cleared,
// their metadata kept with when and by whom, and the erasure audited in
// the same transaction.
func eraseCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var customer string
	// Only the database's settings: -h lists erase's own flags, not every
	// one of serve's.
	cfg, err := config.ParseOnly("erase", []string{"DATABASE_URL", "HOOKD_MIGRATE_DATABASE_URL"}, args, getenv, stderr,
		func(fs *flag.FlagSet) {
			fs.StringVar(&customer, "customer", "", "the Stripe customer (cus_...) whose events' payloads to erase")
		})
	if err != nil {
		return err
	}
	if customer == "" {
		return errNoCustomer
	}
	if err := queue.CheckCustomerID(customer); err != nil {
		return fmt.Errorf("-customer: %w", err)
	}
	pool, _, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	by := commandLineActor()
	var erased queue.Erased
	err = queue.New(pool).InTx(ctx, func(tx *queue.Tx) error {
		if erased, err = tx.EraseCustomer(ctx, customer, by); err != nil {
			return err
		}
		return audit.Record(ctx, tx.PgxTx(), by, audit.Erase, customer, erased.Payloads)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, erased.Summary(customer))
	return nil
}

// errNoCustomer is the answer to `hookd erase` without a customer.
var errNoCustomer = errors.New("usage: hookd erase -customer cus_ID")
