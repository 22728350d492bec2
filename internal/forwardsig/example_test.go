package forwardsig_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/forwardsig"
)

// exampleSecret is a HOOKD_FORWARD_SECRET: whsec_ and the base64 of the key.
var exampleSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the key hookd and the app share"))

// An app checks each delivery's signature before it trusts the body: the
// demo app does so with Verify. A body changed on the way, or a delivery
// signed longer ago than the tolerance, does not verify.
func ExampleVerify() {
	key, err := forwardsig.ParseSecret(exampleSecret)
	if err != nil {
		fmt.Println(err)
		return
	}
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`)
	h := http.Header{}
	forwardsig.Sign(h, key, "evt_1", sent, body)
	fmt.Println(forwardsig.HeaderID+":", h.Get(forwardsig.HeaderID))
	fmt.Println(forwardsig.HeaderTimestamp+":", h.Get(forwardsig.HeaderTimestamp))

	fmt.Println("as sent:", forwardsig.Verify(h, key, body, sent.Add(time.Second), 5*time.Minute))
	changed := []byte(`{"id":"evt_1","object":"event","type":"invoice.voided"}`)
	fmt.Println("body changed:", forwardsig.Verify(h, key, changed, sent.Add(time.Second), 5*time.Minute))
	fmt.Println("an hour late:", forwardsig.Verify(h, key, body, sent.Add(time.Hour), 5*time.Minute))
	// Output:
	// webhook-id: evt_1
	// webhook-timestamp: 1767323045
	// as sent: true
	// body changed: false
	// an hour late: false
}

// An app that is not written in Go, or does not import hookd, verifies the
// Standard Webhooks signature itself (or with a Standard Webhooks library):
// the key is the base64 after whsec_, the signed text is
// "webhook-id.webhook-timestamp.body", and webhook-signature holds one or
// more "v1,<base64 HMAC-SHA256>" separated by spaces.
func Example_verifyInTheApp() {
	// What hookd sent.
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`)
	sent := time.Now()
	h := http.Header{}
	key, _ := forwardsig.ParseSecret(exampleSecret)
	forwardsig.Sign(h, key, "evt_1", sent, body)

	// What the app does, with the standard library only.
	verified := func(secret string, h http.Header, body []byte, now time.Time) bool {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return false
		}
		id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			return false // a stale delivery may be a replayed one
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, sig := range strings.Fields(h.Get("webhook-signature")) {
			if v, ok := strings.CutPrefix(sig, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
				return true
			}
		}
		return false
	}
	fmt.Println(verified(exampleSecret, h, body, time.Now()))
	// Output: true
}

// A secret is rotated without a delivery failing: for a while hookd signs
// under both the new secret and the previous one (SignAll, the new one
// first), so an app still holding the previous secret verifies, and so does
// one already holding the new secret. A key that is neither does not.
func ExampleSignAll_rotation() {
	previous, _ := forwardsig.ParseSecret(exampleSecret)
	next, _ := forwardsig.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString([]byte("the key that replaces it")))
	other, _ := forwardsig.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString([]byte("some other app's key")))

	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`)
	h := http.Header{}
	forwardsig.SignAll(h, [][]byte{next, previous}, "evt_1", sent, body)
	fmt.Println("signatures:", len(strings.Fields(h.Get(forwardsig.HeaderSignature))))

	now := sent.Add(time.Second)
	fmt.Println("app with the previous secret:", forwardsig.Verify(h, previous, body, now, 5*time.Minute))
	fmt.Println("app with the new secret:", forwardsig.Verify(h, next, body, now, 5*time.Minute))
	fmt.Println("app with another secret:", forwardsig.Verify(h, other, body, now, 5*time.Minute))
	// Output:
	// signatures: 2
	// app with the previous secret: true
	// app with the new secret: true
	// app with another secret: false
}
