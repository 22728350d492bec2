package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// eraseCommand runs `hookd erase -customer cus_...`, for a GDPR request:
// the event log's payloads of every event about the customer are cleared,
// their metadata kept with when and by whom, and the erasure audited in
// the same transaction: the dashboard's erase, in actions.
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
	by := actions.Actor{Account: audit.Account{Email: commandLineActor()}}
	erased, err := actions.New(actions.Stores{Queue: queue.New(pool)}).Erase(ctx, by, customer)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, erased.Summary(customer))
	return nil
}

// errNoCustomer is the answer to `hookd erase` without a customer.
var errNoCustomer = errors.New("usage: hookd erase -customer cus_ID")
