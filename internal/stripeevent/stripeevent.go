// Package stripeevent makes Stripe events as Stripe sends them, and their
// Stripe-Signature header, signed by stripe-go's own webhook package. It is
// the one place hookd builds an event: `hookd send-test-event` and the demo
// send realistic ones (Sample: the pretty-printed JSON of an event envelope
// around an invoice, payment intent, charge, customer, subscription or
// checkout session, 1 to 2 KB each), and the tests, the e2e suite, the fake
// Stripe API, the load generator and `hookd doctor` build theirs around an
// object of their own (Event, Minimal). The one reading of a
// Stripe-Signature header's elements is here too (SignatureElements).
package stripeevent

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// APIVersion is the API version the events are rendered in.
const APIVersion = "2025-03-31.basil"

// Event is a Stripe event: the envelope Stripe posts around the API object
// the event is about.
type Event struct {
	ID      string // evt_...
	Type    string // e.g. invoice.paid
	Created time.Time
	// APIVersion is the version the event is rendered in; empty means
	// APIVersion, the one hookd's samples use.
	APIVersion string
	// Object is data.object: the JSON of the object, copied as it is.
	Object []byte
	// PreviousAttributes is data.previous_attributes, the changed fields'
	// old values, for an *.updated event; nil for the others.
	PreviousAttributes []byte
	// RequestID and IdempotencyKey name the API request that caused the
	// event; empty for an event no request caused, which Stripe sends as
	// null.
	RequestID, IdempotencyKey string
	// Account, for a Connect event, is the connected account (acct_...)
	// it happened in; "" for the platform's own.
	Account string
	// Livemode: a live-mode event; false is a test-mode one.
	Livemode bool
}

// JSON returns the event compact, its fields in Stripe's order.
func (e Event) JSON() []byte {
	b := fmt.Appendf(nil, `{"id":%s,"object":"event",`, jsonString(e.ID))
	if e.Account != "" {
		b = fmt.Appendf(b, `"account":%s,`, jsonString(e.Account))
	}
	b = fmt.Appendf(b, `"api_version":%s,"created":%d,"data":{"object":%s`,
		jsonString(cmp.Or(e.APIVersion, APIVersion)), e.Created.Unix(), e.Object)
	if e.PreviousAttributes != nil {
		b = fmt.Appendf(b, `,"previous_attributes":%s`, e.PreviousAttributes)
	}
	return fmt.Appendf(b, `},"livemode":%t,"pending_webhooks":1,"request":{"id":%s,"idempotency_key":%s},"type":%s}`,
		e.Livemode, jsonNullable(e.RequestID), jsonNullable(e.IdempotencyKey), jsonString(e.Type))
}

// ThinEvent is a thin event, as an event destination with the thin
// payload style sends it ("object": "v2.core.event"): no data.object, the
// object it is about named in related_object, created an ISO-8601 string.
type ThinEvent struct {
	ID      string // evt_...
	Type    string // e.g. v1.invoice.paid, v2.core.event_destination.ping
	Created time.Time
	// Livemode: a live-mode event; false is a test-mode one.
	Livemode bool
	// Context, for an event of a connected account, is that account.
	Context string
	// Related is the object the event is about; its zero value leaves
	// related_object out.
	Related RelatedObject
	// SnapshotEvent, for a thin v1.* event, is the id of the snapshot
	// event it mirrors.
	SnapshotEvent string
	// RequestID, when set, is the reason: the API request that caused it.
	RequestID string
}

// ThinObjectType is the object of a thin event, which an event destination
// sending thin payloads posts and /v2/core/events lists.
const ThinObjectType = "v2.core.event"

// RelatedObject is a thin event's related_object.
type RelatedObject struct {
	ID   string // e.g. in_...
	Type string // e.g. invoice
	URL  string // e.g. /v1/invoices/in_...
}

// JSON returns the thin event compact, its fields in Stripe's order.
func (e ThinEvent) JSON() []byte {
	b := fmt.Appendf(nil, `{"id":%s,"object":%s,"type":%s,"livemode":%t,"created":%s`,
		jsonString(e.ID), jsonString(ThinObjectType), jsonString(e.Type), e.Livemode,
		jsonString(e.Created.UTC().Format("2006-01-02T15:04:05.000Z")))
	if e.Context != "" {
		b = fmt.Appendf(b, `,"context":%s`, jsonString(e.Context))
	}
	if e.Related != (RelatedObject{}) {
		b = fmt.Appendf(b, `,"related_object":{"id":%s,"type":%s,"url":%s}`,
			jsonString(e.Related.ID), jsonString(e.Related.Type), jsonString(e.Related.URL))
	}
	if e.RequestID != "" {
		b = fmt.Appendf(b, `,"reason":{"type":"request","request":{"id":%s,"idempotency_key":null}}`, jsonString(e.RequestID))
	}
	if e.SnapshotEvent != "" {
		b = fmt.Appendf(b, `,"snapshot_event":%s`, jsonString(e.SnapshotEvent))
	}
	return append(b, '}')
}

// Thin returns the thin v1.* event that mirrors the snapshot event
// snapshotID of eventType (e.g. invoice.paid) about the invoice in_1:
// what a thin destination sends beside a snapshot endpoint.
func Thin(id, eventType, snapshotID string) []byte {
	return ThinEvent{ID: id, Type: "v1." + eventType, Created: time.Now(), SnapshotEvent: snapshotID,
		Related: RelatedObject{ID: "in_1", Type: "invoice", URL: "/v1/invoices/in_1"}}.JSON()
}

// PingType is the event Stripe pings an event destination with.
const PingType = "v2.core.event_destination.ping"

// Ping returns the ping Stripe sends the event destination destinationID
// (ed_...): a thin event about the destination itself.
func Ping(id, destinationID string) []byte {
	return ThinEvent{ID: id, Type: PingType, Created: time.Now(),
		Related: RelatedObject{ID: destinationID, Type: "v2.core.event_destination",
			URL: "/v2/core/event_destinations/" + destinationID}}.JSON()
}

// Connect returns a small event of eventType with id, created now, in the
// connected account account: what a Connect endpoint receives.
func Connect(id, eventType, account string, livemode bool) []byte {
	return Event{ID: id, Type: eventType, Created: time.Now(), Object: []byte(minimalObject),
		Account: account, Livemode: livemode}.JSON()
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

func jsonNullable(s string) []byte {
	if s == "" {
		return []byte("null")
	}
	return jsonString(s)
}

// minimalObject is the data.object of a Minimal event: a small invoice.
const minimalObject = `{"id":"in_1","object":"invoice","amount_paid":2000,"currency":"usd"}`

// Minimal returns a small event of eventType with id, created now, around
// a small invoice: for tests, where only the envelope matters.
func Minimal(id, eventType string) []byte {
	return Event{ID: id, Type: eventType, Created: time.Now(), Object: []byte(minimalObject)}.JSON()
}

// Types are the event types Sample renders with an object of their own;
// any other type gets an invoice.
var Types = []string{
	"invoice.paid",
	"invoice.payment_failed",
	"payment_intent.succeeded",
	"charge.succeeded",
	"charge.refunded",
	"customer.created",
	"customer.subscription.updated",
	"checkout.session.completed",
}

// mix is the order Mix deals event types in: a store's day, where payments
// and paid invoices dominate and a subscription change is one event in ten.
var mix = []string{
	"payment_intent.succeeded", "charge.succeeded", "invoice.paid", "checkout.session.completed",
	"customer.subscription.updated", "payment_intent.succeeded", "charge.succeeded", "invoice.paid",
	"customer.created", "invoice.payment_failed",
	"payment_intent.succeeded", "charge.succeeded", "invoice.paid", "checkout.session.completed",
	"customer.subscription.updated", "payment_intent.succeeded", "charge.succeeded", "invoice.paid",
	"customer.created", "charge.refunded",
}

// Mix returns the event type of the i-th event of a realistic mix. The mix
// repeats every 20 events, so any 50 of them hold the same types.
func Mix(i int) string { return mix[i%len(mix)] }

// Sample returns a Stripe event of eventType created at now, with fresh
// ids, and the event's id. Its data.object's metadata says it was sent by
// sentBy, so an app can tell a test event from a customer's.
func Sample(eventType, sentBy string, now time.Time) (payload []byte, id string, err error) {
	return SampleIn(eventType, sentBy, "", now)
}

// SampleIn is Sample for an event of the connected account account
// (acct_...), as a Connect endpoint receives it; "" is the account's own.
func SampleIn(eventType, sentBy, account string, now time.Time) (payload []byte, id string, err error) {
	if eventType == "" {
		return nil, "", fmt.Errorf("event type must not be empty")
	}
	f := newFixture(now, sentBy)
	object, previous := f.object(eventType)
	e := Event{ID: NewID("evt"), Type: eventType, Created: now, Account: account, RequestID: NewID("req"), IdempotencyKey: newUUID()}
	if e.Object, err = json.Marshal(object); err != nil {
		return nil, "", fmt.Errorf("render %s event: %w", eventType, err)
	}
	if previous != nil {
		if e.PreviousAttributes, err = json.Marshal(previous); err != nil {
			return nil, "", fmt.Errorf("render %s event: %w", eventType, err)
		}
	}
	// Stripe posts its events pretty-printed, two spaces deep.
	var out bytes.Buffer
	if err := json.Indent(&out, e.JSON(), "", "  "); err != nil {
		return nil, "", fmt.Errorf("render %s event: %w", eventType, err)
	}
	return out.Bytes(), e.ID, nil
}

// Sign returns the Stripe-Signature header Stripe would send with payload,
// signed with secret at the given time.
func Sign(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: payload, Secret: secret, Timestamp: at,
	}).Header
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a Stripe-shaped object id with the given prefix, like
// evt_1QcWq2LkdIwHu7ixM3gRXyZb.
func NewID(prefix string) string {
	return prefix + "_1" + randomString(base62, 23)
}

func randomString(alphabet string, n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		k, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand never fails on Linux; if it does, nothing else works either
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

func newUUID() string {
	const hex = "0123456789abcdef"
	s := randomString(hex, 32)
	return s[:8] + "-" + s[8:12] + "-4" + s[13:16] + "-a" + s[17:20] + "-" + s[20:]
}

type person struct{ name, email, city, line1, postal, state string }

var people = []person{
	{"Jenny Rosen", "jenny.rosen@example.com", "San Francisco", "510 Townsend St", "94103", "CA"},
	{"Malik Okafor", "malik@okafor.example", "Austin", "1100 Congress Ave", "78701", "TX"},
	{"Aiko Tanaka", "aiko.tanaka@example.org", "Seattle", "400 Broad St", "98109", "WA"},
	{"Lucía Fernández", "lucia@fernandez.example", "Miami", "1 Biscayne Blvd", "33132", "FL"},
}

// fixture holds the ids and the customer one event's object refers to, so
// an invoice, its charge and its payment intent name each other consistently.
type fixture struct {
	now                                            time.Time
	sentBy                                         string
	who                                            person
	customer, invoice, charge, intent, sub, method string
	product, price, oldPrice                       string
}

func newFixture(now time.Time, sentBy string) fixture {
	k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(people))))
	return fixture{
		now: now, sentBy: sentBy, who: people[k.Int64()],
		customer: NewID("cus")[:18], invoice: NewID("in"), charge: NewID("ch"), intent: NewID("pi"),
		sub: NewID("sub"), method: NewID("pm"), product: NewID("prod")[:19], price: NewID("price"), oldPrice: NewID("price"),
	}
}

func (f fixture) metadata() map[string]string {
	return map[string]string{"sent_by": f.sentBy}
}

func (f fixture) address() map[string]any {
	return map[string]any{"city": f.who.city, "country": "US", "line1": f.who.line1, "line2": nil,
		"postal_code": f.who.postal, "state": f.who.state}
}

// object returns the data.object of an event of eventType and, for an
// update, its data.previous_attributes.
func (f fixture) object(eventType string) (object, previous map[string]any) {
	switch eventType {
	case "invoice.payment_failed":
		return f.invoiceObject(false), nil
	case "payment_intent.succeeded":
		return f.paymentIntent(), nil
	case "charge.succeeded":
		return f.chargeObject(false), nil
	case "charge.refunded":
		return f.chargeObject(true), nil
	case "customer.created":
		return f.customerObject(), nil
	case "customer.subscription.updated":
		return f.subscription(f.price, 4900), map[string]any{
			"items": map[string]any{"data": []any{map[string]any{
				"price": map[string]any{"id": f.oldPrice, "unit_amount": 2900}}}},
		}
	case "checkout.session.completed":
		return f.checkoutSession(), nil
	default:
		return f.invoiceObject(true), nil
	}
}

func (f fixture) invoiceObject(paid bool) map[string]any {
	start, end := f.now.AddDate(0, -1, 0).Unix(), f.now.Unix()
	inv := map[string]any{
		"id":                 f.invoice,
		"object":             "invoice",
		"account_country":    "US",
		"account_name":       "Acme Cloud",
		"amount_due":         2900,
		"amount_paid":        2900,
		"amount_remaining":   0,
		"attempt_count":      1,
		"attempted":          true,
		"billing_reason":     "subscription_cycle",
		"collection_method":  "charge_automatically",
		"created":            f.now.Add(-time.Hour).Unix(),
		"currency":           "usd",
		"customer":           f.customer,
		"customer_email":     f.who.email,
		"customer_name":      f.who.name,
		"hosted_invoice_url": "https://invoice.stripe.com/i/acct_1Nv0FGQ9RKHgCVdK/test_" + randomString(base62, 40),
		"lines": map[string]any{
			"object": "list",
			"data": []any{map[string]any{
				"id": NewID("il"), "object": "line_item", "amount": 2900, "currency": "usd",
				"description": "1 × Pro (at $29.00 / month)",
				"period":      map[string]any{"start": start, "end": end},
				"pricing": map[string]any{"type": "price_details",
					"price_details": map[string]any{"price": f.oldPrice, "product": f.product}},
				"quantity": 1,
			}},
			"has_more":    false,
			"total_count": 1,
			"url":         "/v1/invoices/" + f.invoice + "/lines",
		},
		"livemode":             false,
		"metadata":             f.metadata(),
		"next_payment_attempt": nil,
		"number":               "ACME-" + randomString("0123456789", 4),
		"parent": map[string]any{"type": "subscription_details",
			"subscription_details": map[string]any{"subscription": f.sub}},
		"period_end":         end,
		"period_start":       start,
		"status":             "paid",
		"status_transitions": map[string]any{"finalized_at": f.now.Add(-time.Hour).Unix(), "paid_at": f.now.Unix()},
		"subtotal":           2900,
		"total":              2900,
	}
	if !paid {
		inv["amount_paid"], inv["amount_remaining"], inv["status"] = 0, 2900, "open"
		inv["next_payment_attempt"] = f.now.Add(72 * time.Hour).Unix()
		inv["status_transitions"] = map[string]any{"finalized_at": f.now.Add(-time.Hour).Unix(), "paid_at": nil}
	}
	return inv
}

func (f fixture) paymentIntent() map[string]any {
	return map[string]any{
		"id":                   f.intent,
		"object":               "payment_intent",
		"amount":               4900,
		"amount_capturable":    0,
		"amount_received":      4900,
		"capture_method":       "automatic_async",
		"client_secret":        f.intent + "_secret_" + randomString(base62, 25),
		"confirmation_method":  "automatic",
		"created":              f.now.Add(-2 * time.Second).Unix(),
		"currency":             "usd",
		"customer":             f.customer,
		"description":          "Order #" + randomString("0123456789", 5),
		"latest_charge":        f.charge,
		"livemode":             false,
		"metadata":             f.metadata(),
		"payment_method":       f.method,
		"payment_method_types": []string{"card"},
		"receipt_email":        f.who.email,
		"status":               "succeeded",
	}
}

func (f fixture) chargeObject(refunded bool) map[string]any {
	ch := map[string]any{
		"id":                  f.charge,
		"object":              "charge",
		"amount":              4900,
		"amount_captured":     4900,
		"amount_refunded":     0,
		"balance_transaction": NewID("txn"),
		"billing_details": map[string]any{"address": f.address(), "email": f.who.email,
			"name": f.who.name, "phone": nil},
		"captured": true,
		"created":  f.now.Add(-time.Second).Unix(),
		"currency": "usd",
		"customer": f.customer,
		"livemode": false,
		"metadata": f.metadata(),
		"outcome": map[string]any{"network_status": "approved_by_network", "reason": nil, "risk_level": "normal",
			"risk_score": 32, "seller_message": "Payment complete.", "type": "authorized"},
		"paid":           true,
		"payment_intent": f.intent,
		"payment_method": f.method,
		"payment_method_details": map[string]any{"type": "card", "card": map[string]any{
			"brand": "visa", "country": "US", "exp_month": 12, "exp_year": f.now.Year() + 3, "funding": "credit",
			"last4": "4242", "network": "visa",
			"checks": map[string]any{"address_line1_check": "pass", "address_postal_code_check": "pass", "cvc_check": "pass"},
		}},
		"receipt_url": "https://pay.stripe.com/receipts/payment/" + randomString(base62, 48),
		"refunded":    false,
		"status":      "succeeded",
	}
	if refunded {
		ch["amount_refunded"], ch["refunded"] = 4900, true
	}
	return ch
}

func (f fixture) customerObject() map[string]any {
	return map[string]any{
		"id":               f.customer,
		"object":           "customer",
		"address":          f.address(),
		"balance":          0,
		"created":          f.now.Unix(),
		"currency":         nil,
		"default_source":   nil,
		"delinquent":       false,
		"description":      nil,
		"email":            f.who.email,
		"invoice_prefix":   randomString("ABCDEF0123456789", 8),
		"invoice_settings": map[string]any{"custom_fields": nil, "default_payment_method": f.method, "footer": nil},
		"livemode":         false,
		"metadata":         f.metadata(),
		"name":             f.who.name,
		"phone":            nil,
		"preferred_locales": []string{
			"en-US",
		},
		"tax_exempt": "none",
	}
}

func (f fixture) subscriptionItem(price string, amount int) map[string]any {
	start := f.now.AddDate(0, 0, -12)
	return map[string]any{
		"id": NewID("si")[:17], "object": "subscription_item", "created": start.Unix(),
		"current_period_start": start.Unix(), "current_period_end": start.AddDate(0, 1, 0).Unix(),
		"price": map[string]any{"id": price, "object": "price", "active": true, "currency": "usd",
			"product": f.product, "recurring": map[string]any{"interval": "month", "interval_count": 1},
			"type": "recurring", "unit_amount": amount},
		"quantity": 1, "subscription": f.sub,
	}
}

func (f fixture) subscription(price string, amount int) map[string]any {
	start := f.now.AddDate(0, 0, -12)
	return map[string]any{
		"id":                     f.sub,
		"object":                 "subscription",
		"billing_cycle_anchor":   start.Unix(),
		"cancel_at":              nil,
		"cancel_at_period_end":   false,
		"collection_method":      "charge_automatically",
		"created":                start.AddDate(0, -3, 0).Unix(),
		"currency":               "usd",
		"customer":               f.customer,
		"default_payment_method": f.method,
		"items": map[string]any{"object": "list", "data": []any{f.subscriptionItem(price, amount)},
			"has_more": false, "total_count": 1, "url": "/v1/subscription_items?subscription=" + f.sub},
		"latest_invoice": f.invoice,
		"livemode":       false,
		"metadata":       f.metadata(),
		"start_date":     start.AddDate(0, -3, 0).Unix(),
		"status":         "active",
	}
}

func (f fixture) checkoutSession() map[string]any {
	return map[string]any{
		"id":                  "cs_test_" + randomString(base62, 58),
		"object":              "checkout.session",
		"amount_subtotal":     4900,
		"amount_total":        4900,
		"client_reference_id": "order_" + randomString("0123456789", 6),
		"created":             f.now.Add(-3 * time.Minute).Unix(),
		"currency":            "usd",
		"customer":            f.customer,
		"customer_details": map[string]any{"address": f.address(), "email": f.who.email, "name": f.who.name,
			"phone": nil, "tax_exempt": "none"},
		"expires_at":     f.now.Add(24 * time.Hour).Unix(),
		"livemode":       false,
		"metadata":       f.metadata(),
		"mode":           "subscription",
		"payment_status": "paid",
		"status":         "complete",
		"subscription":   f.sub,
		"success_url":    "https://shop.example.com/thanks?session_id={CHECKOUT_SESSION_ID}",
		"url":            nil,
	}
}
