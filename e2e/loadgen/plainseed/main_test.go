package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

const secret = "whsec_plainseed_test"

// emptyDatabase makes an empty database for one test and drops it after.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	server := queuetest.ServerURL()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "plainseed_test_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// The seed's answers: a new event is processed and marked, a redelivery
// is answered from its marker, a delivery while another holds the event's
// lock is 503, a bad signature is 400.
func TestHandlerAnswersAsTheSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := emptyDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, createSQL); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&handler{pool: pool, secret: secret})
	t.Cleanup(srv.Close)

	post := func(body []byte, sig string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, strings.TrimSpace(string(answer))
	}
	event := stripeevent.Event{ID: "evt_plainseed_1", Type: "invoice.paid", Created: time.Now(), Object: []byte(`{"id":"in_1","object":"invoice"}`)}.JSON()
	sig := stripeevent.Sign(event, secret, time.Now())

	if status, answer := post(event, sig); status != http.StatusOK || answer != "processed" {
		t.Errorf("first delivery: %d %q, want 200 processed", status, answer)
	}
	if status, answer := post(event, sig); status != http.StatusOK || answer != "already processed" {
		t.Errorf("redelivery: %d %q, want 200 already processed", status, answer)
	}
	var markers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM processed_webhook_events`).Scan(&markers); err != nil || markers != 1 {
		t.Errorf("%d markers (%v), want 1", markers, err)
	}

	other := stripeevent.Event{ID: "evt_plainseed_2", Type: "invoice.paid", Created: time.Now(), Object: []byte(`{"id":"in_2","object":"invoice"}`)}.JSON()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var locked bool
	if err := tx.QueryRow(ctx, lockSQL, "evt_plainseed_2").Scan(&locked); err != nil || !locked {
		t.Fatalf("take the lock: %v, %v", locked, err)
	}
	if status, _ := post(other, stripeevent.Sign(other, secret, time.Now())); status != http.StatusServiceUnavailable {
		t.Errorf("delivery while another holds the lock: %d, want 503", status)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if status, answer := post(other, stripeevent.Sign(other, secret, time.Now())); status != http.StatusOK || answer != "processed" {
		t.Errorf("delivery once the lock is free: %d %q, want 200 processed", status, answer)
	}

	if status, _ := post(event, stripeevent.Sign(event, "whsec_other", time.Now())); status != http.StatusBadRequest {
		t.Errorf("wrong secret: %d, want 400", status)
	}
}
