package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// sendTestEvent posts one realistic, correctly signed Stripe event to a
// hookd receiver and prints the answer, so an operator can check a
// deployment end to end without a Stripe account at hand.
func sendTestEvent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookd send-test-event", flag.ContinueOnError)
	fs.SetOutput(stderr)
	eventType := fs.String("type", "invoice.paid", "the event's type")
	target := fs.String("url", "http://localhost:8080/webhooks/stripe", "the receiver to post to")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: hookd send-test-event [flags]\n\n"+
			"Signs the event with the first secret of $STRIPE_WEBHOOK_SECRET.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var secrets []Secret
	if err := parseSecrets(&secrets, getenv("STRIPE_WEBHOOK_SECRET")); err != nil {
		return fmt.Errorf("STRIPE_WEBHOOK_SECRET: %v", err)
	}
	if len(secrets) == 0 {
		return errors.New("STRIPE_WEBHOOK_SECRET: set it to the receiver's signing secret")
	}

	payload, id, err := sampleEvent(*eventType, time.Now())
	if err != nil {
		return err
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: payload, Secret: secrets[0].Reveal(),
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("-url: %v", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("send %s: %w", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "sent %s (%s) to %s\n%s: %s\n", id, *eventType, *target, resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// sampleEvent returns a Stripe event of eventType shaped like the ones
// Stripe sends (API version, data.object, request), with fresh ids.
func sampleEvent(eventType string, now time.Time) ([]byte, string, error) {
	if eventType == "" {
		return nil, "", errors.New("-type: must not be empty")
	}
	object, prefix := "invoice", "in"
	switch {
	case strings.HasPrefix(eventType, "charge."):
		object, prefix = "charge", "ch"
	case strings.HasPrefix(eventType, "payment_intent."):
		object, prefix = "payment_intent", "pi"
	case strings.HasPrefix(eventType, "customer.subscription."):
		object, prefix = "subscription", "sub"
	case strings.HasPrefix(eventType, "customer."):
		object, prefix = "customer", "cus"
	case strings.HasPrefix(eventType, "checkout.session."):
		object, prefix = "checkout.session", "cs_test"
	}
	id := "evt_test_" + randomID()
	event := map[string]any{
		"id":          id,
		"object":      "event",
		"api_version": "2025-03-31.basil",
		"created":     now.Unix(),
		"data": map[string]any{"object": map[string]any{
			"id":       prefix + "_test_" + randomID(),
			"object":   object,
			"amount":   2000,
			"currency": "usd",
			"customer": "cus_test_" + randomID(),
			"livemode": false,
			"metadata": map[string]string{"sent_by": "hookd send-test-event"},
		}},
		"livemode":         false,
		"pending_webhooks": 1,
		"request":          map[string]any{"id": nil, "idempotency_key": nil},
		"type":             eventType,
	}
	b, err := json.Marshal(event)
	if err != nil {
		return nil, "", fmt.Errorf("build sample event: %w", err)
	}
	return b, id, nil
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
