// Package workertest makes Stripe deliveries for tests: realistic event
// bodies, and Stripe-Signature headers signed by stripe-go's own webhook
// package, so tests exercise the receiver with real signatures.
package workertest

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

var eventSeq atomic.Int64

// NewEventID returns a Stripe-style event id unique within the test binary.
func NewEventID() string {
	return fmt.Sprintf("evt_test_%d_%d", time.Now().UnixNano(), eventSeq.Add(1))
}

// StripeEvent is a minimal but realistic Stripe event body.
func StripeEvent(id, eventType string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-03-31.basil","created":%d,`+
		`"data":{"object":{"id":"in_1","object":"invoice","amount_paid":2000,"currency":"usd"}},`+
		`"livemode":false,"pending_webhooks":1,"type":%q}`, id, time.Now().Unix(), eventType)
}

// Sign returns the Stripe-Signature header for payload signed with secret
// at the given time, as Stripe would send it.
func Sign(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: payload, Secret: secret, Timestamp: at,
	}).Header
}
