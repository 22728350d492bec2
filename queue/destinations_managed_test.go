package queue_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

var (
	managedSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("billing's own key"))
	managedOldSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("billing's previous key"))
)

func newKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, destinations.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return key
}

// checked is e checked as the dashboard's forms check it.
func checked(t *testing.T, e destinations.Entry) *destinations.Destination {
	t.Helper()
	e.Source = destinations.SourceDashboard
	d, err := destinations.CheckEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func addManaged(ctx context.Context, s *queue.Store, d *destinations.Destination, key []byte) error {
	return s.InTx(ctx, func(tx *queue.Tx) error {
		return tx.AddManagedDestination(ctx, queue.ManagedWrite{Destination: d, By: "ana@example.com"}, key)
	})
}

// A dashboard destination's secrets and headers are kept sealed: no
// byte of them is in the table in the clear, ManagedSet opens them with
// the key, and another key or none opens nothing.
func TestManagedDestinations_SecretsSealedAtRest(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	key := newKey(t)
	billing := checked(t, destinations.Entry{Name: "billing", URL: "https://billing.internal/stripe",
		Types: []string{"invoice.*"}, Filter: "data.object.amount >= 1000", Concurrency: 4, Timeout: "10s",
		SigningSecrets: []string{managedSecret, managedOldSecret},
		Headers:        map[string]string{"Authorization": "Bearer billing-token-42"}})
	if err := addManaged(ctx, s, billing, key); err != nil {
		t.Fatal(err)
	}

	for _, plain := range []string{"whsec", "billing-token-42", "Bearer", "Authorization"} {
		n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations d
			WHERE d::text LIKE '%' || $1 || '%'
			   OR encode(signing_secrets_sealed, 'escape') LIKE '%' || $1 || '%'
			   OR encode(headers_sealed, 'escape') LIKE '%' || $1 || '%'`, plain)
		if n != 0 {
			t.Errorf("%q is in the destinations table in the clear", plain)
		}
	}

	set, err := s.ManagedSet(ctx, "", key)
	if err != nil {
		t.Fatal(err)
	}
	got := set.Get("billing")
	if got == nil || len(set.Destinations) != 1 || set.Source != destinations.SourceDashboard {
		t.Fatalf("ManagedSet: %+v", set)
	}
	if !slices.Equal(got.SigningSecrets, []string{managedSecret, managedOldSecret}) ||
		got.Headers.Get("Authorization") != "Bearer billing-token-42" || got.Filter != "data.object.amount >= 1000" ||
		got.Concurrency != 4 || got.Timeout.String() != "10s" || !slices.Equal(got.Types, []string{"invoice.*"}) ||
		got.Source != destinations.SourceDashboard {
		t.Errorf("billing as ManagedSet read it: %+v", got)
	}

	if _, err := s.ManagedSet(ctx, "", newKey(t)); err == nil || !strings.Contains(err.Error(), "sealed under another key") {
		t.Errorf("ManagedSet with another key: %v, want it refused as sealed under another key", err)
	}
	if _, err := s.ManagedSet(ctx, "", nil); !errors.Is(err, destinations.ErrNoKey) {
		t.Errorf("ManagedSet without a key: %v, want ErrNoKey", err)
	}
	// A sealed value moved to another row does not open there.
	crm := checked(t, destinations.Entry{Name: "crm", URL: "https://crm.internal/stripe"})
	if err := addManaged(ctx, s, crm, key); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE destinations SET signing_secrets_sealed =
		(SELECT signing_secrets_sealed FROM destinations WHERE name = 'billing') WHERE name = 'crm'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ManagedSet(ctx, "", key); err == nil || !strings.Contains(err.Error(), `destination "crm"`) {
		t.Errorf("ManagedSet with billing's secrets moved to crm: %v, want crm's refused", err)
	}
}

// Without a key, a destination with no secret and no header is added;
// one with either is refused, and nothing is written.
func TestManagedDestinations_NoKeyRefusesOnlySecrets(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if err := addManaged(ctx, s, checked(t, destinations.Entry{Name: "plain", URL: "http://plain.internal"}), nil); err != nil {
		t.Fatalf("a destination without secrets, without a key: %v", err)
	}
	for _, e := range []destinations.Entry{
		{Name: "signed", URL: "http://signed.internal", SigningSecrets: []string{managedSecret}},
		{Name: "authed", URL: "http://authed.internal", Headers: map[string]string{"Authorization": "Bearer x"}},
	} {
		if err := addManaged(ctx, s, checked(t, e), nil); !errors.Is(err, destinations.ErrNoKey) {
			t.Errorf("%s without a key: %v, want ErrNoKey", e.Name, err)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations`); n != 1 {
		t.Errorf("%d destinations, want the plain one alone", n)
	}
	set, err := s.ManagedSet(ctx, "", nil)
	if err != nil || len(set.Destinations) != 1 {
		t.Errorf("ManagedSet without a key, no secret kept: %v, %+v", err, set)
	}
}

// An edit writes the settings; the secrets and headers are kept unless
// written, and written empty they are gone. A name taken is refused; a
// retired destination's name is configured again.
func TestManagedDestinations_EditKeepsSecretsUnlessWritten(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	key := newKey(t)
	e := destinations.Entry{Name: "billing", URL: "https://billing.internal/stripe",
		SigningSecrets: []string{managedSecret}, Headers: map[string]string{"Authorization": "Bearer a"}}
	if err := addManaged(ctx, s, checked(t, e), key); err != nil {
		t.Fatal(err)
	}
	if err := addManaged(ctx, s, checked(t, e), key); !errors.Is(err, queue.ErrDestinationTaken) {
		t.Errorf("billing added twice: %v, want ErrDestinationTaken", err)
	}
	edit := func(e destinations.Entry, secrets, headers bool) {
		t.Helper()
		err := s.InTx(ctx, func(tx *queue.Tx) error {
			return tx.EditManagedDestination(ctx, queue.ManagedWrite{Destination: checked(t, e), WriteSecrets: secrets,
				WriteHeaders: headers, By: "bo@example.com"}, key)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	edit(destinations.Entry{Name: "billing", URL: "https://billing.internal/v2", Livemode: "live"}, false, false)
	set, err := s.ManagedSet(ctx, "", key)
	if err != nil {
		t.Fatal(err)
	}
	d := set.Get("billing")
	if d.URL != "https://billing.internal/v2" || d.Livemode != "live" || !slices.Equal(d.SigningSecrets, []string{managedSecret}) ||
		d.Headers.Get("Authorization") != "Bearer a" {
		t.Errorf("after an edit that typed no secret: %+v", d)
	}
	m, err := s.ManagedDestination(ctx, "billing")
	if err != nil || m.UpdatedBy == nil || *m.UpdatedBy != "bo@example.com" || !m.SigningSecretsSet || !m.HeadersSet {
		t.Errorf("the row after the edit: %+v, %v", m, err)
	}

	edit(destinations.Entry{Name: "billing", URL: "https://billing.internal/v2", SigningSecrets: []string{managedOldSecret}}, true, true)
	set, err = s.ManagedSet(ctx, "", key)
	if err != nil {
		t.Fatal(err)
	}
	if d := set.Get("billing"); !slices.Equal(d.SigningSecrets, []string{managedOldSecret}) || len(d.Headers) != 0 {
		t.Errorf("after replacing the secret and clearing the headers: %+v", d)
	}
	if m, _ := s.ManagedDestination(ctx, "billing"); !m.SigningSecretsSet || m.HeadersSet {
		t.Errorf("the row after replacing the secret and clearing the headers: %+v", m)
	}

	err = s.InTx(ctx, func(tx *queue.Tx) error {
		return tx.EditManagedDestination(ctx, queue.ManagedWrite{Destination: checked(t, destinations.Entry{Name: "nobody",
			URL: "http://x.internal"})}, key)
	})
	if !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("an edit of no destination: %v, want ErrNotFound", err)
	}
}

// A dashboard destination's rate and order_by are kept in its route, under
// the keys a file's destination is recorded with (the destinations page
// reads them there), and come back from ManagedSet for serve to deliver
// with; an edit that leaves them out takes them away, and the set's hash
// follows.
func TestManagedSet_RateAndOrderBy(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	e := destinations.Entry{Name: "billing", URL: "https://billing.internal/stripe", Rate: 2.5,
		OrderBy: "data.object.customer"}
	if err := addManaged(ctx, s, checked(t, e), nil); err != nil {
		t.Fatal(err)
	}
	set, err := s.ManagedSet(ctx, "https://app.example/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := set.Get("billing")
	if d == nil || d.Rate != 2.5 || d.OrderBy != "data.object.customer" {
		t.Fatalf("billing as ManagedSet read it: %+v, want rate 2.5 and order_by data.object.customer", d)
	}
	if def := set.Get(destinations.DefaultName); def == nil || def.Rate != 0 || def.OrderBy != "" {
		t.Errorf("HOOKD_FORWARD_URL's default: %+v, want neither", def)
	}
	var rate float64
	var orderBy string
	if err := bundle.pool.QueryRow(ctx, `SELECT (route->>'rate')::float8, route->>'order_by' FROM destinations
		WHERE name = 'billing'`).Scan(&rate, &orderBy); err != nil || rate != 2.5 || orderBy != "data.object.customer" {
		t.Errorf("the route kept: rate %v, order_by %q, %v", rate, orderBy, err)
	}
	m, err := s.ManagedDestination(ctx, "billing")
	if got := m.Entry(); err != nil || got.Rate != 2.5 || got.OrderBy != "data.object.customer" {
		t.Errorf("the row's entry: %+v, %v", got, err)
	}

	err = s.InTx(ctx, func(tx *queue.Tx) error {
		return tx.EditManagedDestination(ctx, queue.ManagedWrite{Destination: checked(t, destinations.Entry{Name: "billing",
			URL: "https://billing.internal/stripe"}), By: "bo@example.com"}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.ManagedSet(ctx, "https://app.example/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Get("billing"); d.Rate != 0 || d.OrderBy != "" || after.Hash == set.Hash {
		t.Errorf("after an edit without them: rate %v, order_by %q, hash %s (was %s)", d.Rate, d.OrderBy, after.Hash, set.Hash)
	}
}

// A removal retires a destination while a delivery to it waits, and
// deletes it otherwise; adding the retired one's name again configures it
// anew. ManagedVersion changes with every add, edit and removal, and
// with nothing else.
func TestManagedDestinations_RemoveRetiresWhatWaits(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	versions := []string{}
	version := func() string {
		t.Helper()
		v, err := s.ManagedVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(versions, v) {
			t.Errorf("version %q again after a change", v)
		}
		versions = append(versions, v)
		return v
	}
	version()
	for _, name := range []string{"billing", "crm"} {
		if err := addManaged(ctx, s, checked(t, destinations.Entry{Name: name, URL: "http://" + name + ".internal"}), nil); err != nil {
			t.Fatal(err)
		}
		version()
	}
	// A pause is no change of the set.
	if _, err := bundle.pool.Exec(ctx, `UPDATE destinations SET paused_at = now(), paused_by = 'ana', paused_reason = 'x' WHERE name = 'crm'`); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.ManagedVersion(ctx); v != versions[len(versions)-1] {
		t.Errorf("the version changed with a pause")
	}
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_1", EventType: "invoice.paid",
		Payload: []byte(`{"id":"evt_1"}`), Error: "HTTP 500", Destination: "billing"}
	if _, err := queuetest.NewSeed(s).Enqueue(ctx, fe); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeliveriesWaiting(ctx, "billing"); err != nil || n != 1 {
		t.Errorf("DeliveriesWaiting(billing) = %d, %v; want 1", n, err)
	}
	remove := func(name string) (bool, error) {
		var retired bool
		err := s.InTx(ctx, func(tx *queue.Tx) error {
			var err error
			retired, err = tx.RemoveManagedDestination(ctx, name)
			return err
		})
		return retired, err
	}
	if retired, err := remove("billing"); err != nil || !retired {
		t.Errorf("remove billing, a delivery waiting: retired %v, %v; want retired", retired, err)
	}
	version()
	if retired, err := remove("crm"); err != nil || retired {
		t.Errorf("remove crm, nothing waiting: retired %v, %v; want deleted", retired, err)
	}
	version()
	if _, err := remove("crm"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("remove crm again: %v, want ErrNotFound", err)
	}
	if _, err := remove("billing"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("remove billing, retired: %v, want ErrNotFound", err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations WHERE name = 'billing' AND retired_at IS NOT NULL`); n != 1 {
		t.Errorf("billing is not kept retired")
	}
	set, err := s.ManagedSet(ctx, "https://app.example/hook", nil)
	if err != nil || !slices.Equal(set.Names(), []string{destinations.DefaultName}) ||
		set.Hash != destinations.Single("https://app.example/hook").Hash {
		t.Errorf("ManagedSet with billing retired and crm gone: %v, %+v; want HOOKD_FORWARD_URL's default alone", err, set)
	}

	if err := addManaged(ctx, s, checked(t, destinations.Entry{Name: "billing", URL: "http://billing.internal/v2"}), nil); err != nil {
		t.Fatalf("billing added again while retired: %v", err)
	}
	version()
	set, err = s.ManagedSet(ctx, "https://app.example/hook", nil)
	if err != nil || !slices.Equal(set.Names(), []string{destinations.DefaultName, "billing"}) || set.Source != destinations.SourceDashboard {
		t.Errorf("ManagedSet with billing back: %v, %+v", err, set)
	}
}

// A dashboard destination named default is refused beside
// HOOKD_FORWARD_URL's, naming the field.
func TestManagedSet_DefaultTwiceIsRefused(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	if err := addManaged(ctx, s, checked(t, destinations.Entry{Name: "default", URL: "http://other.internal"}), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ManagedSet(ctx, "https://app.example/hook", nil); err == nil ||
		!strings.Contains(err.Error(), `destination "default": name: used by destinations[0] too`) {
		t.Errorf("ManagedSet: %v", err)
	}
}

// Applying HOOKD_FORWARD_URL's default, or the dashboard's set, leaves the
// dashboard's destinations as their actions wrote them; applying a file,
// the truth while set, takes their names over (their sealed values gone)
// and retires or deletes the others.
func TestApplyDestinations_LeavesTheDashboardsAlone(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	key := newKey(t)
	for _, e := range []destinations.Entry{
		{Name: "billing", URL: "https://billing.internal/stripe?team=7", SigningSecrets: []string{managedSecret}},
		{Name: "crm", URL: "https://crm.internal"},
	} {
		if err := addManaged(ctx, s, checked(t, e), key); err != nil {
			t.Fatal(err)
		}
	}
	def := queue.AppliedDestination{Name: "default", URL: "https://app.example/hook", Source: queue.SourceForwardURL,
		Route: map[string]any{"types": []string{"*"}}}
	dash := queue.AppliedDestination{Name: "billing", URL: "https://billing.internal/stripe", Source: queue.SourceDashboard,
		Route: map[string]any{"types": []string{"*"}}}
	for _, ds := range [][]queue.AppliedDestination{{def}, {def, dash}} {
		got, err := s.ApplyDestinations(ctx, ds, "h")
		if err != nil || len(got.Retired)+len(got.Removed) != 0 {
			t.Fatalf("apply %+v: %+v, %v", ds, got, err)
		}
		set, err := s.ManagedSet(ctx, "https://app.example/hook", key)
		if err != nil || !slices.Equal(set.Names(), []string{"default", "billing", "crm"}) ||
			set.Get("billing").URL != "https://billing.internal/stripe?team=7" || len(set.Get("billing").SigningSecrets) != 1 {
			t.Fatalf("after applying %+v: %v, %+v", ds, err, set)
		}
	}

	// HOOKD_FORWARD_URL unset: its default goes, the dashboard's stay.
	if got, err := s.ApplyDestinations(ctx, []queue.AppliedDestination{dash}, "h1"); err != nil ||
		!slices.Equal(got.Removed, []string{"default"}) {
		t.Fatalf("apply the dashboard's alone: %+v, %v", got, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations WHERE source = 'dashboard'`); n != 2 {
		t.Fatalf("%d dashboard destinations after applying them alone, want 2", n)
	}

	file := queue.AppliedDestination{Name: "billing", URL: "https://billing.internal/v2", Source: queue.SourceDestinationsFile,
		Route: map[string]any{"types": []string{"*"}}}
	got, err := s.ApplyDestinations(ctx, []queue.AppliedDestination{file}, "h2")
	if err != nil || !slices.Equal(got.Removed, []string{"crm"}) {
		t.Fatalf("apply a file naming billing: %+v, %v", got, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations
		WHERE name = 'billing' AND source = 'file' AND signing_secrets_sealed IS NULL`); n != 1 {
		t.Errorf("billing is not the file's, its secret gone")
	}
}
