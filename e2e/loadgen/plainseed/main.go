// Command plainseed is the webhook handler hookd grew from, written plainly
// in Go: the peer `make bench-load` loads beside hookd's receiver, with the
// same generator, the same bodies and the same clients, in a process of its
// own so that its CPU is measured as hookd's is.
//
// Each delivery is verified with stripe-go's webhook.ConstructEvent and
// handled in one transaction, as the seed did: BEGIN, a transaction-scoped
// advisory lock on the event's id (503 when another delivery of the same
// event holds it), the dedup read of the marker, the marker's insert,
// COMMIT. Nothing is processed (hookd runs with its discard processor beside
// it). It creates its marker table when missing, so it runs on an empty
// database. Its pool is pgx's, sized by the URL's pool_max_conns: the load
// generator sets it to its number of clients.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v82/webhook"
)

// The seed's SQL, statement by statement.
const (
	createSQL = `CREATE TABLE IF NOT EXISTS processed_webhook_events (
	event_id text PRIMARY KEY,
	processed_at timestamptz NOT NULL DEFAULT now()
)`
	lockSQL   = `SELECT pg_try_advisory_xact_lock(hashtextextended('stripe_webhook:' || $1::text, 0))`
	existsSQL = `SELECT EXISTS(SELECT 1 FROM processed_webhook_events WHERE event_id = $1)`
	markSQL   = `INSERT INTO processed_webhook_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING`
)

// maxBody is what Stripe's own examples read of a webhook body.
const maxBody = 65536

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL, its pool_max_conns the pool's size (default $DATABASE_URL)")
	secret := flag.String("secret", os.Getenv("STRIPE_WEBHOOK_SECRET"), "Stripe webhook signing secret (default $STRIPE_WEBHOOK_SECRET)")
	flag.Parse()
	if *dbURL == "" || *secret == "" {
		log.Fatal("plainseed: -database-url and -secret are required")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *dbURL, *secret); err != nil {
		log.Fatal("plainseed: ", err)
	}
}

func run(ctx context.Context, addr, dbURL, secret string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, createSQL); err != nil {
		return fmt.Errorf("create marker table: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/stripe", &handler{pool: pool, secret: secret})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type handler struct {
	pool   *pgxpool.Pool
	secret string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusRequestEntityTooLarge)
		return
	}
	event, err := webhook.ConstructEvent(payload, r.Header.Get("Stripe-Signature"), h.secret)
	if err != nil {
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	status, answer, err := h.handle(r.Context(), event.ID)
	if err != nil {
		log.Printf("plainseed: event %s: %v", event.ID, err)
		http.Error(w, "database error", http.StatusInternalServerError)
		return
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	fmt.Fprintln(w, answer)
}

// handle is the seed's one transaction for one delivery.
func (h *handler) handle(ctx context.Context, id string) (int, string, error) {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return 0, "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var locked bool
	if err := tx.QueryRow(ctx, lockSQL, id).Scan(&locked); err != nil {
		return 0, "", err
	}
	if !locked {
		return http.StatusServiceUnavailable, "event is being handled by another delivery", nil
	}
	var seen bool
	if err := tx.QueryRow(ctx, existsSQL, id).Scan(&seen); err != nil {
		return 0, "", err
	}
	if seen {
		return http.StatusOK, "already processed", tx.Commit(ctx)
	}
	// The event would be processed here; the bench's processor discards it.
	if _, err := tx.Exec(ctx, markSQL, id); err != nil {
		return 0, "", err
	}
	return http.StatusOK, "processed", tx.Commit(ctx)
}
