package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue/queuetest"
)

// TestRunErase: `hookd erase -customer` clears the payloads of the events
// about that customer and no other, says how many, and audits it in the
// command line's name; a malformed id changes nothing.
func TestRunErase(t *testing.T) {
	t.Parallel()
	dbURL := queuetest.NewDatabaseURL(t)
	env := envOf(map[string]string{"DATABASE_URL": dbURL})
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, object_id, customer, received_at, processed_how, payload)
		SELECT 'evt_' || i, 'invoice.paid', 'default', 'in_' || i, CASE WHEN i < 4 THEN 'cus_Gdpr1' ELSE 'cus_Other' END,
		       now(), 'inline', '{}'
		FROM generate_series(0, 9) i`); err != nil {
		t.Fatal(err)
	}

	err = run(context.Background(), []string{"erase", "-customer", "evt_notacustomer"}, env, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is not a Stripe customer id") {
		t.Errorf("erase of a non-customer id: %v", err)
	}
	if err := run(context.Background(), []string{"erase"}, env, strings.NewReader(""), io.Discard, io.Discard); err == nil ||
		err.Error() != "usage: hookd erase -customer cus_ID" {
		t.Errorf("erase without -customer: %v, want the usage", err)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM event_log WHERE payload IS NULL`); n != 0 {
		t.Fatalf("%d payloads erased by refused commands", n)
	}

	var out bytes.Buffer
	if err := run(context.Background(), []string{"erase", "-customer", "cus_Gdpr1"}, env, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatalf("erase: %v", err)
	}
	if want := "erased the payloads of 4 events about cus_Gdpr1\n"; out.String() != want {
		t.Errorf("erase said %q, want %q", out.String(), want)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM event_log
		WHERE payload IS NULL AND payload_erased_by LIKE 'command line: %@%'`); n != 4 {
		t.Errorf("%d payloads erased in the command line's name, want 4", n)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM event_log WHERE payload IS NOT NULL`); n != 6 {
		t.Errorf("%d payloads left, want the other customer's 6", n)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM audit_log
		WHERE action = 'erase' AND target = 'cus_Gdpr1' AND count = 4 AND user_email LIKE 'command line: %@%'`); n != 1 {
		t.Errorf("%d erasures in the audit log, want 1", n)
	}
}

// `hookd erase -h` lists erase's own flags and the database's, not the
// dozens of serve's that erase never reads.
func TestRunEraseHelpListsItsOwnFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"erase", "-h"}, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	help := stderr.String()
	for _, want := range []string{"-customer", "-database-url", "-migrate-database-url"} {
		if !strings.Contains(help, want) {
			t.Errorf("erase -h lacks %s:\n%s", want, help)
		}
	}
	if n := strings.Count(help, "\n  -"); n != 3 {
		t.Errorf("erase -h lists %d flags, want its 3:\n%s", n, help)
	}
}
