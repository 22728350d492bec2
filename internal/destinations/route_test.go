package destinations_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/destinations"
)

// parse parses a file that must be good.
func parse(t testing.TB, file string) *destinations.Set {
	t.Helper()
	set, err := destinations.Parse([]byte(file), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// one is the one destination of a file holding it alone, with route, its
// keys indented as a destination's.
func one(t *testing.T, route string) *destinations.Destination {
	t.Helper()
	return parse(t, "destinations:\n  - name: d\n    url: https://app.example\n"+route).Destinations[0]
}

func ptr(b bool) *bool { return &b }

// TestMatch_Route: types (exact and globs), livemode, accounts and
// endpoints, each with its default, each one a rule the event must pass.
func TestMatch_Route(t *testing.T) {
	t.Parallel()
	paid := destinations.Event{Type: "invoice.paid", Livemode: ptr(true), Endpoint: "default"}
	with := func(change func(*destinations.Event)) destinations.Event {
		ev := paid
		change(&ev)
		return ev
	}
	tests := []struct {
		name, route string
		ev          destinations.Event
		want        bool
	}{
		{"defaults take all", "", with(func(e *destinations.Event) { e.Type, e.Livemode, e.Account = "x.y", nil, "acct_1" }), true},
		{"exact", "    types: [invoice.paid]\n", paid, true},
		{"exact, other", "    types: [invoice.paid]\n", with(func(e *destinations.Event) { e.Type = "invoice.paid_out" }), false},
		{"glob", "    types: [\"invoice.*\"]\n", paid, true},
		{"glob, deeper", "    types: [\"invoice.*\"]\n", with(func(e *destinations.Event) { e.Type = "invoice.payment.failed" }), true},
		{"glob, prefix only", "    types: [\"invoice.*\"]\n", with(func(e *destinations.Event) { e.Type = "invoiceitem.created" }), false},
		{"glob inside", "    types: [\"customer.*.updated\"]\n", with(func(e *destinations.Event) { e.Type = "customer.subscription.updated" }), true},
		{"glob inside, other", "    types: [\"customer.*.updated\"]\n", with(func(e *destinations.Event) { e.Type = "customer.subscription.deleted" }), false},
		{"star", "    types: [\"*\"]\n", with(func(e *destinations.Event) { e.Type = "v1.billing.meter.error_report_triggered" }), true},
		{"second of a list", "    types: [charge.refunded, \"invoice.*\"]\n", paid, true},
		{"live takes live", "    livemode: live\n", paid, true},
		{"live, not test", "    livemode: live\n", with(func(e *destinations.Event) { e.Livemode = ptr(false) }), false},
		{"live, not unsaid", "    livemode: live\n", with(func(e *destinations.Event) { e.Livemode = nil }), false},
		{"test takes test", "    livemode: test\n", with(func(e *destinations.Event) { e.Livemode = ptr(false) }), true},
		{"test, not live", "    livemode: test\n", paid, false},
		{"test, not unsaid", "    livemode: test\n", with(func(e *destinations.Event) { e.Livemode = nil }), false},
		{"any takes unsaid", "    livemode: any\n", with(func(e *destinations.Event) { e.Livemode = nil }), true},
		{"platform", "    accounts: [platform]\n", paid, true},
		{"platform, not connected", "    accounts: [platform]\n", with(func(e *destinations.Event) { e.Account = "acct_1" }), false},
		{"account", "    accounts: [acct_1, acct_2]\n", with(func(e *destinations.Event) { e.Account = "acct_2" }), true},
		{"account, not other", "    accounts: [acct_1]\n", with(func(e *destinations.Event) { e.Account = "acct_3" }), false},
		{"account, not platform", "    accounts: [acct_1]\n", paid, false},
		{"any account", "    accounts: [any]\n", with(func(e *destinations.Event) { e.Account = "acct_9" }), true},
		{"endpoint", "    endpoints: [connect, default]\n", paid, true},
		{"endpoint, other", "    endpoints: [connect]\n", paid, false},
		{"any endpoint", "    endpoints: [any]\n", with(func(e *destinations.Event) { e.Endpoint = "thin" }), true},
		{"every rule", "    types: [\"invoice.*\"]\n    livemode: live\n    accounts: [platform]\n    endpoints: [default]\n", paid, true},
		{"every rule but one", "    types: [\"invoice.*\"]\n    livemode: live\n    accounts: [platform]\n    endpoints: [connect]\n", paid, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ok, err := one(t, tc.route).Match(tc.ev)
			if ok != tc.want || err != nil {
				t.Errorf("Match(%+v) = %v, %v; want %v", tc.ev, ok, err, tc.want)
			}
		})
	}
}

// TestMatch_Filter: a filter reads the event's JSON (its numbers doubles,
// compared with ints as written), and one that fails on an event (a
// missing field, a wrong type, a value that is no bool, a loop run past
// its deadline) is a non-match that says why.
func TestMatch_Filter(t *testing.T) {
	t.Parallel()
	const big = `{"id":"evt_1","object":"event","type":"invoice.paid","livemode":true,"created":1767323045,
		"data":{"object":{"amount":1000,"currency":"usd","customer":"cus_1","metadata":{"tier":"gold"}}}}`
	const small = `{"id":"evt_2","type":"invoice.paid","account":"acct_1","data":{"object":{"amount":999.5,"currency":"usd"}}}`
	const bare = `{"id":"evt_3","type":"invoice.paid","data":{"object":{}}}`
	tests := []struct {
		name, filter, payload string
		want                  bool
		wantErr               string
	}{
		{"amount and currency", `data.object.amount >= 1000 && data.object.currency == "usd"`, big, true, ""},
		{"amount below", `data.object.amount >= 1000 && data.object.currency == "usd"`, small, false, ""},
		{"int equals double", `data.object.amount == 1000`, big, true, ""},
		{"double literal", `data.object.amount > 999.9`, big, true, ""},
		{"type prefix", `type.startsWith("invoice.")`, big, true, ""},
		{"nested", `data.object.metadata.tier in ["gold", "platinum"]`, big, true, ""},
		{"has", `has(data.object.metadata) && data.object.metadata.tier == "gold"`, bare, false, ""},
		{"platform's own", `account == null`, big, true, ""},
		{"connected", `account == null`, small, false, ""},
		{"livemode", `livemode`, big, true, ""},
		{"created", `created > 1767323000`, big, true, ""},
		{"missing field", `data.object.amount >= 1000`, bare, false, "filter: no such key: amount"},
		{"missing nested", `data.object.metadata.tier == "gold"`, small, false, "filter: no such key: metadata"},
		{"wrong type", `data.object.currency > 5`, big, false, "filter: no such overload"},
		{"not a bool", `dyn(data.object.currency)`, big, false, "filter: gave string, not a bool"},
		{"not JSON", `livemode`, `{"id":`, false, "filter: the event is not a JSON object"},
		{"a JSON list", `livemode`, `[1]`, false, "filter: the event is not a JSON object"},
		{"JSON null", `livemode`, `null`, false, "filter: the event is not a JSON object"},
		{"loops too long", `data.object.lines.all(x, data.object.lines.all(y, x <= y || x > y))`, lines(20000), false,
			"filter: ran past 100ms on this event, and was stopped"},
		{"loops", `data.object.lines.all(x, data.object.lines.all(y, x <= y || x > y))`, lines(20), true, ""},
		{"loops and fails", `data.object.lines.exists(x, x.price > 5)`, lines(20), false, "filter: no such key: price"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := one(t, fmt.Sprintf("    filter: %q\n", tc.filter))
			ok, err := d.Match(destinations.Event{Type: "invoice.paid", Payload: []byte(tc.payload)})
			if ok != tc.want {
				t.Errorf("Match = %v, want %v", ok, tc.want)
			}
			if got := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
				t.Errorf("Match's error = %v, want %q", err, tc.wantErr)
			}
		})
	}
	// The route's other rules come first: an event of another type is no
	// match, the filter never run, so its missing field is no failure.
	d := one(t, "    types: [charge.refunded]\n    filter: data.object.amount >= 1000\n")
	if ok, err := d.Match(destinations.Event{Type: "invoice.paid", Payload: []byte(bare)}); ok || err != nil {
		t.Errorf("Match of another type = %v, %v", ok, err)
	}
}

// lines is an event whose data.object.lines holds n numbers.
func lines(n int) string {
	nums := make([]string, n)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	return `{"data":{"object":{"lines":[` + strings.Join(nums, ",") + `]}}}`
}

// TestRoute: the destinations that take an event, in file order, and the
// failed filters by name; none failed is a nil map.
func TestRoute(t *testing.T) {
	t.Parallel()
	set := parse(t, `destinations:
  - name: analytics
    url: https://analytics.example
  - name: billing
    url: https://billing.example
    types: ["invoice.*"]
  - name: big
    url: https://big.example
    filter: data.object.amount >= 1000
  - name: live
    url: https://live.example
    livemode: live
`)
	names := func(ds []*destinations.Destination) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Name)
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		name, payload string
		ev            destinations.Event
		want, failed  string
	}{
		{"all", `{"data":{"object":{"amount":1500}}}`, destinations.Event{Type: "invoice.paid", Livemode: ptr(true)}, "analytics,billing,big,live", ""},
		{"small test invoice", `{"data":{"object":{"amount":5}}}`, destinations.Event{Type: "invoice.paid", Livemode: ptr(false)}, "analytics,billing", ""},
		{"no amount", `{"data":{"object":{}}}`, destinations.Event{Type: "customer.created", Livemode: ptr(true)}, "analytics,live", "big"},
	}
	for _, tc := range tests {
		tc.ev.Payload = []byte(tc.payload)
		matched, failed := set.Route(tc.ev)
		if got := names(matched); got != tc.want {
			t.Errorf("%s: Route took %s, want %s", tc.name, got, tc.want)
		}
		var failedNames []string
		for name, err := range failed {
			failedNames = append(failedNames, name)
			if err.Error() != "filter: no such key: amount" {
				t.Errorf("%s: %s's error: %v", tc.name, name, err)
			}
		}
		if slices.Sort(failedNames); strings.Join(failedNames, ",") != tc.failed || (tc.failed == "" && failed != nil) {
			t.Errorf("%s: Route's failed = %v, want %q", tc.name, failed, tc.failed)
		}
	}
}

// TestHash: the same settings give the same hash, in every process and
// whatever the file's layout, comments or the variables' values (secrets);
// any setting, or a variable's name, changes it.
func TestHash(t *testing.T) {
	t.Parallel()
	set, err := destinations.Parse([]byte(specExample), specEnv)
	if err != nil {
		t.Fatal(err)
	}
	base := set.Hash
	// The hash of specExample, as every replica of every release computes
	// it (a change here is a change every replica's recorded hash sees):
	// the SHA-256 of {"destinations":[{"accounts":["any"],"concurrency":8,
	// "endpoints":["any"],"filter":"data.object.amount \u003e= 1000",
	// "headers_env":{"Authorization":"BILLING_AUTH"},... ,"url":"https://billing.internal/stripe"},
	// {... "name":"crm" ...}],"source":"file"}, every key sorted, computed
	// apart from Go.
	const golden = "32a4a1697c3ebec504648c11a1ae9e9cc1aa9d5e57bbe65d06804339fbadf653"
	if base != golden {
		t.Errorf("the hash of SPEC's example changed: %s, was %s", base, golden)
	}
	relaid := strings.NewReplacer("    ", "      ", "  - ", "  -   ", "# ", "# other words: ").Replace(specExample)
	relaid = strings.Replace(relaid, `types: ["invoice.*"]`, "types:\n        - invoice.*", 1)
	other, err := destinations.Parse([]byte(relaid), env(map[string]string{
		"BILLING_WEBHOOK_SECRET": secretOld, "BILLING_AUTH": "Bearer another"}))
	if err != nil {
		t.Fatal(err)
	}
	if other.Hash != base {
		t.Errorf("another layout, comments and values of the variables changed the hash")
	}
	vars := env(map[string]string{"BILLING_WEBHOOK_SECRET": secretNew, "BILLING_AUTH": "x", "OTHER": secretNew})
	for _, change := range [][2]string{
		{"name: billing", "name: billing2"},
		{"https://billing.internal/stripe", "https://billing.internal/stripe2"},
		{`["invoice.*"]`, `["invoice.*", "charge.*"]`},
		{"livemode: any", "livemode: live"},
		{"accounts: [any]", "accounts: [platform]"},
		{"endpoints: [any]", "endpoints: [default]"},
		{">= 1000", ">= 1001"},
		{"rate: 20", "rate: 20.5"},
		{"concurrency: 8", "concurrency: 9"},
		{"timeout: 10s", "timeout: 11s"},
		{"order_by: data.object.customer", "order_by: data.object.id"},
		{"signing_secret_env: BILLING_WEBHOOK_SECRET", "signing_secret_env: OTHER"},
		{"{Authorization: BILLING_AUTH}", "{Authorization: OTHER}"},
		{"{Authorization: BILLING_AUTH}", "{X-Authorization: BILLING_AUTH}"},
		{"url: http://crm.internal:8080/hooks/stripe\n", "url: http://crm.internal:8080/hooks/stripe\n  - name: crm2\n    url: https://x\n"},
	} {
		changed, err := destinations.Parse([]byte(strings.Replace(specExample, change[0], change[1], 1)), vars)
		if err != nil {
			t.Fatalf("%s -> %s: %v", change[0], change[1], err)
		}
		if changed.Hash == base {
			t.Errorf("%s -> %s left the hash as it was", change[0], change[1])
		}
	}
	// Defaults written out are the defaults.
	if parse(t, "destinations:\n  - name: a\n    url: https://x\n").Hash != parse(t,
		"destinations:\n  - name: a\n    url: https://x\n    types: [\"*\"]\n    livemode: any\n    accounts: [any]\n    endpoints: [any]\n    concurrency: 0\n").Hash {
		t.Error("writing the defaults out changed the hash")
	}
}

// eventOf is a Stripe event of size bytes, for the benchmark: an
// invoice.paid whose footer pads it.
func eventOf(size int) []byte {
	const format = `{"id":"evt_1QbBqVLkdIwHu7ix9hGh4rTz","object":"event","api_version":"2024-06-20","created":1767323045,
"data":{"object":{"id":"in_1QbBqULkdIwHu7ixPmE9Yo2F","object":"invoice","amount_due":1500,"amount_paid":1500,
"amount":1500,"currency":"usd","customer":"cus_RU9aL9ZyxmQpQc","customer_email":"jenny@example.com",
"lines":{"object":"list","data":[{"id":"il_1","amount":1500,"currency":"usd","description":"1 x Pro (at $15.00 / month)",
"period":{"end":1769915045,"start":1767323045},"quantity":1}],"has_more":false,"total_count":1},
"metadata":{"order":"6735","tier":"gold"},"status":"paid","subscription":"sub_1QbBqULkdIwHu7ixn5hCp8qd","footer":"%s"}},
"livemode":true,"pending_webhooks":3,"request":{"id":null,"idempotency_key":null},"type":"invoice.paid"}`
	bare := len(fmt.Sprintf(format, ""))
	return fmt.Appendf(nil, format, strings.Repeat("x", max(0, size-bare)))
}

// BenchmarkRoute: three destinations, one with a filter, on a 1.5 KB
// event.
func BenchmarkRoute(b *testing.B) {
	set := parse(b, `destinations:
  - name: billing
    url: https://billing.example
    types: ["invoice.*"]
  - name: big
    url: https://big.example
    filter: data.object.amount >= 1000 && data.object.currency == "usd"
  - name: analytics
    url: https://analytics.example
`)
	ev := destinations.Event{Type: "invoice.paid", Livemode: ptr(true), Endpoint: "default", Payload: eventOf(1536)}
	if len(ev.Payload) != 1536 {
		b.Fatalf("the event is %d bytes", len(ev.Payload))
	}
	b.ReportAllocs()
	for b.Loop() {
		matched, failed := set.Route(ev)
		if len(matched) != 3 || failed != nil {
			b.Fatalf("Route = %d, %v", len(matched), failed)
		}
	}
}

// TestRoute_ParsesTheEventOnce: three destinations with filters cost the
// event's JSON parsed once, not once each: Route's allocations for three
// are well under twice those for one, most of which are the parse.
func TestRoute_ParsesTheEventOnce(t *testing.T) {
	const filtered = "  - name: %s\n    url: https://x\n    filter: data.object.amount >= 1000\n"
	one := parse(t, "destinations:\n"+fmt.Sprintf(filtered, "a"))
	three := parse(t, "destinations:\n"+fmt.Sprintf(filtered, "a")+fmt.Sprintf(filtered, "b")+fmt.Sprintf(filtered, "c"))
	ev := destinations.Event{Type: "invoice.paid", Payload: eventOf(1536)}
	allocs := func(set *destinations.Set, n int) float64 {
		return testing.AllocsPerRun(100, func() {
			if matched, _ := set.Route(ev); len(matched) != n {
				t.Fatalf("Route took %d, want %d", len(matched), n)
			}
		})
	}
	a, b := allocs(one, 1), allocs(three, 3)
	if b >= 2*a {
		t.Errorf("Route allocates %v for three filters, %v for one: the event is parsed for each", b, a)
	}
}

// TestRoute_Concurrent: a Set is read by every delivery at once; routes
// run together, on events that match, miss and fail, each get exactly
// their own answer (run with -race).
func TestRoute_Concurrent(t *testing.T) {
	t.Parallel()
	set := parse(t, `destinations:
  - name: invoices
    url: https://x
    types: ["invoice.*"]
  - name: big
    url: https://x
    filter: data.object.amount >= 1000
`)
	const workers, each = 8, 200
	type result struct{ matched, failed int }
	results := make(chan result, workers)
	for w := range workers {
		go func() {
			var r result
			for i := range each {
				amount := fmt.Sprintf(`{"amount":%d}`, (w*each+i)%2000)
				if i%10 == 0 {
					amount = `{}`
				}
				matched, failed := set.Route(destinations.Event{Type: "invoice.paid",
					Payload: []byte(`{"data":{"object":` + amount + `}}`)})
				r.matched += len(matched)
				r.failed += len(failed)
			}
			results <- r
		}()
	}
	var total result
	for range workers {
		r := <-results
		total.matched += r.matched
		total.failed += r.failed
	}
	// Every event goes to invoices; big takes amounts of 1000 to 1999
	// among those that have one, and fails on each tenth, which has none.
	wantBig, wantFailed := 0, 0
	for w := range workers {
		for i := range each {
			switch {
			case i%10 == 0:
				wantFailed++
			case (w*each+i)%2000 >= 1000:
				wantBig++
			}
		}
	}
	if want := (result{workers*each + wantBig, wantFailed}); total != want {
		t.Errorf("routed %+v, want %+v", total, want)
	}
}
