package receiver

import (
	"strings"
	"testing"
)

func BenchmarkParseEvent(b *testing.B) {
	body := []byte(`{"id":"evt_1QcWq2LkdIwHu7ixM3gRXyZb","object":"event","api_version":"2025-03-31.basil",` +
		`"created":1764547200,"data":{"object":{"id":"in_1","object":"invoice","amount_due":2000,"currency":"usd",` +
		`"lines":{"object":"list","data":[{"id":"il_1","amount":2000,"description":"1 × Pro (at $20.00 / month)",` +
		`"period":{"end":1767225600,"start":1764547200},"quantity":1}],"has_more":false},"metadata":{"note":"` +
		strings.Repeat("0123456789abcdef", 60) + `"},"paid":true,"total":2000}},"livemode":false,` +
		`"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"invoice.paid"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var ev event
		if err := parseEvent(body, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
