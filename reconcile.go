package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/reconcileruns"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/worker/receiver"
	"github.com/hookd/hookd/worker/reconcile"
	"github.com/hookd/hookd/worker/stripeapi"
)

// reconcileCommand runs `hookd reconcile [-since 72h] [-dry-run] [-event
// evt_...]`: one reconciliation with Stripe's Events API, through the same
// pipeline and processor as hookd serve. It prints one summary line; an
// error from Stripe's API is one line on stderr and a non-zero exit, with
// nothing changed.
func reconcileCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var since time.Duration
	var dryRun bool
	var eventID string
	cfg, err := parseConfig("reconcile", args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.Func("since", "how far back to look, like 72h (default: $HOOKD_RECONCILE_WINDOW; at most 720h)", func(v string) error {
			return parseReconcileWindow(&since, v)
		})
		fs.BoolVar(&dryRun, "dry-run", false, "list and count the events, but process nothing and record nothing")
		fs.StringVar(&eventID, "event", "", "pull this one event (evt_...) from Stripe instead of a window")
	})
	if err != nil {
		return err
	}
	if cfg.StripeAPIKey == "" || cfg.StripeEndpointID == "" {
		return errors.New("STRIPE_API_KEY and STRIPE_WEBHOOK_ENDPOINT_ID: both are needed to reconcile " +
			"(a restricted key with Read access to Events and Webhook Endpoints, and the we_... id of hookd's endpoint)")
	}
	if eventID != "" && (dryRun || since != 0) {
		return errors.New("-event pulls one event: it takes neither -since nor -dry-run")
	}
	if eventID != "" && !strings.HasPrefix(eventID, "evt_") {
		return fmt.Errorf("-event: %q is not a Stripe event id (evt_...)", eventID)
	}
	if since > cfg.MarkerRetention {
		return fmt.Errorf("-since: at most HOOKD_MARKER_RETENTION (%s): older events' markers may be pruned, "+
			"and they would be processed again", humanize.Typed(cfg.MarkerRetention))
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	pool, _, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := queue.New(pool)
	proc, err := newProcessor(cfg, logger)
	if err != nil {
		return err
	}
	receiver := receiver.New(store, logger, receiver.Config{
		Secrets: reveal(cfg.StripeSecrets), Processor: proc, ProcessTimeout: cfg.ForwardTimeout})
	r := newReconciler(cfg, store, receiver, logger)

	if eventID != "" {
		return pullCommand(ctx, r, eventID, stdout)
	}
	return reconcileWindow(ctx, r, since, dryRun, stdout, stderr)
}

// pullCommand is `hookd reconcile -event`: it pulls one event and says
// what became of it.
func pullCommand(ctx context.Context, r *reconcile.Reconciler, eventID string, stdout io.Writer) error {
	p, err := r.Pull(ctx, eventID)
	if errors.Is(err, queue.ErrEventLocked) {
		return fmt.Errorf("%s is being handled by a delivery right now; it needs no pull", eventID)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, pulledText(p))
	return nil
}

// reconcileWindow is `hookd reconcile` over a window: one run, its summary
// on stdout, and notes on stderr about what Stripe told of the endpoint.
func reconcileWindow(ctx context.Context, r *reconcile.Reconciler, since time.Duration, dryRun bool, stdout, stderr io.Writer) error {
	res, err := r.RunOnce(ctx, reconcile.Options{Window: since, DryRun: dryRun, Trigger: reconcileruns.TriggerCommand})
	if errors.Is(err, reconcileruns.ErrRunning) {
		return errors.New("another reconcile run is in progress (the schedule of hookd serve, or an operator); try again when it ends")
	}
	if err != nil {
		if res.Recovered+res.Queued > 0 {
			fmt.Fprintln(stdout, res.Summary())
		}
		return err
	}
	fmt.Fprintln(stdout, res.Summary())
	if res.Endpoint.Status == "disabled" {
		fmt.Fprintf(stderr, "note: Stripe has disabled endpoint %s and sends it nothing; re-enable it in Stripe's dashboard\n", res.Endpoint.ID)
	}
	if res.OtherVersion > 0 {
		fmt.Fprintf(stderr, "note: %d of these events are rendered in another API version than the endpoint's %s; check each one's api_version\n",
			res.OtherVersion, res.Endpoint.APIVersion)
	}
	return nil
}

// pulledText says in one line what a pull did.
func pulledText(p reconcile.Pulled) string {
	head := fmt.Sprintf("%s (%s): ", p.Event.ID, p.Event.Type)
	switch p.Outcome {
	case receiver.Processed:
		return head + "recovered: processed now"
	case receiver.Queued:
		return head + "processing failed; it is on the retry queue"
	case receiver.Duplicate:
		return head + "already processed; nothing to do"
	case receiver.AlreadyQueued:
		return head + "already on the retry queue; nothing to do"
	}
	return head + p.Outcome.String()
}

// newStripeClient returns the client of Stripe's API the configuration
// asks for, or nil without STRIPE_API_KEY.
func newStripeClient(cfg Config, logger *slog.Logger) *stripeapi.Client {
	if cfg.StripeAPIKey == "" {
		return nil
	}
	return stripeapi.New(stripeapi.Config{Key: cfg.StripeAPIKey.Reveal(), URL: cfg.StripeAPIURL, Logger: logger})
}

// newReconciler returns the reconciler the configuration asks for, or nil
// when the key or the endpoint id is not set.
func newReconciler(cfg Config, store *queue.Store, receiver *receiver.Receiver, logger *slog.Logger) *reconcile.Reconciler {
	if cfg.StripeAPIKey == "" || cfg.StripeEndpointID == "" {
		return nil
	}
	client := stripeapi.New(stripeapi.Config{Key: cfg.StripeAPIKey.Reveal(), URL: cfg.StripeAPIURL, Logger: logger})
	return reconcile.New(store, receiver, logger, reconcile.Config{
		Client: client, EndpointID: cfg.StripeEndpointID,
		Window: cfg.ReconcileWindow, Interval: cfg.ReconcileInterval, MaxWindow: cfg.MarkerRetention,
	})
}
