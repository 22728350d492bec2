package stripeevent_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookd/hookd/internal/stripeevent"
)

// Every sample is an event stripe-go accepts, signed the way stripe-go
// verifies, 1 to 2 KB like the real ones, and its object decodes into
// stripe-go's type for it.
func TestSample_IsWhatStripeSends(t *testing.T) {
	t.Parallel()
	const secret = "whsec_sampleTestSecret"
	now := time.Now()
	for _, typ := range stripeevent.Types {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			payload, id, err := stripeevent.Sample(typ, "stripeevent test", now)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(payload); n < 1024 || n > 2560 {
				t.Errorf("payload is %d bytes, want 1 to 2.5 KB", n)
			}
			if !strings.HasPrefix(id, "evt_1") || len(id) != 28 {
				t.Errorf("id %q does not look like Stripe's evt_1 and 23 characters", id)
			}
			ev, err := webhook.ConstructEventWithOptions(payload, stripeevent.Sign(payload, secret, now), secret,
				webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
			if err != nil {
				t.Fatalf("stripe-go refuses the sample: %v", err)
			}
			if ev.ID != id || string(ev.Type) != typ || ev.APIVersion != stripeevent.APIVersion {
				t.Errorf("event = (%s, %s, %s), want (%s, %s, %s)", ev.ID, ev.Type, ev.APIVersion, id, typ, stripeevent.APIVersion)
			}
			var obj struct {
				Object   string            `json:"object"`
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
				t.Fatal(err)
			}
			if obj.Metadata["sent_by"] != "stripeevent test" {
				t.Errorf("metadata = %v, want sent_by", obj.Metadata)
			}
			var target any
			switch obj.Object {
			case "invoice":
				target = &stripe.Invoice{}
			case "payment_intent":
				target = &stripe.PaymentIntent{}
			case "charge":
				target = &stripe.Charge{}
			case "customer":
				target = &stripe.Customer{}
			case "subscription":
				target = &stripe.Subscription{}
			case "checkout.session":
				target = &stripe.CheckoutSession{}
			default:
				t.Fatalf("object %q is none of Stripe's", obj.Object)
			}
			if err := json.Unmarshal(ev.Data.Raw, target); err != nil {
				t.Errorf("stripe-go cannot decode the %s: %v", obj.Object, err)
			}
		})
	}
}

func TestMix_FiftyEventsHoldEveryType(t *testing.T) {
	t.Parallel()
	counts := map[string]int{}
	for i := range 50 {
		counts[stripeevent.Mix(i)]++
	}
	for _, typ := range stripeevent.Types {
		if counts[typ] == 0 {
			t.Errorf("50 events of the mix hold no %s", typ)
		}
	}
	if got := counts["customer.subscription.updated"]; got != 5 {
		t.Errorf("50 events hold %d subscription updates, want 5", got)
	}
}
