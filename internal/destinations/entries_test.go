package destinations_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/destinations"
)

// An entry is checked as a file's destination is: the same defaults, and
// each refusal one line naming the destination and the field, with the
// values' fields signing_secrets and headers; errors.As gives the field.
func TestCheckEntry_RefusesAsTheFileDoes(t *testing.T) {
	t.Parallel()
	d, err := destinations.CheckEntry(destinations.Entry{Name: "billing", URL: "https://billing.internal/stripe",
		SigningSecrets: []string{secretNew, secretOld}, Headers: map[string]string{"authorization": " Bearer b "}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Types, []string{"*"}) || d.Livemode != "any" || !slices.Equal(d.Accounts, []string{"any"}) ||
		!slices.Equal(d.SigningSecrets, []string{secretNew, secretOld}) || d.Headers.Get("Authorization") != "Bearer b" {
		t.Errorf("billing: %+v", d)
	}
	for _, tc := range []struct {
		e           destinations.Entry
		field, want string
	}{
		{destinations.Entry{URL: "http://x"}, "name", "the destination: name: missing"},
		{destinations.Entry{Name: "Billing", URL: "http://x"}, "name", `the destination: name: "Billing" does not match`},
		{destinations.Entry{Name: "b", URL: "ftp://x/y"}, "url", `destination "b": url: "ftp://x/y" is not http or https`},
		{destinations.Entry{Name: "b", URL: "http://x", Types: []string{}}, "types", `destination "b": types: empty`},
		{destinations.Entry{Name: "b", URL: "http://x", Types: []string{"invoice.[a]"}}, "types", `destination "b": types: bad glob`},
		{destinations.Entry{Name: "b", URL: "http://x", Livemode: "both"}, "livemode", `destination "b": livemode: "both" is not live, test or any`},
		{destinations.Entry{Name: "b", URL: "http://x", Accounts: []string{"cus_1"}}, "accounts", `destination "b": accounts: "cus_1"`},
		{destinations.Entry{Name: "b", URL: "http://x", Filter: "data.object.amount >="}, "filter", `destination "b": filter: `},
		{destinations.Entry{Name: "b", URL: "http://x", Concurrency: -1}, "concurrency", `destination "b": concurrency: -1 is below zero`},
		{destinations.Entry{Name: "b", URL: "http://x", Timeout: "10"}, "timeout", `destination "b": timeout: "10" is not a duration`},
		{destinations.Entry{Name: "b", URL: "http://x", Timeout: "3m"}, "timeout", `destination "b": timeout: 3m is longer than 2m0s`},
		{destinations.Entry{Name: "b", URL: "http://x", SigningSecrets: []string{secretNew, "whsec_!"}}, "signing_secrets",
			`destination "b": signing_secrets: secret 2 of 2: `},
		{destinations.Entry{Name: "b", URL: "http://x", Headers: map[string]string{"Webhook-Signature": "x"}}, "headers",
			`destination "b": headers: Webhook-Signature: hookd sets this header itself`},
		{destinations.Entry{Name: "b", URL: "http://x", Headers: map[string]string{"X-Token": " "}}, "headers",
			`destination "b": headers: X-Token: the value is empty`},
		{destinations.Entry{Name: "b", URL: "http://x", Headers: map[string]string{"X-Token": "a\nb"}}, "headers",
			`destination "b": headers: X-Token: the value holds a character`},
		{destinations.Entry{Name: "b", URL: "http://x", Headers: map[string]string{"x-token": "a", "X-Token": "b"}}, "headers",
			`destination "b": headers: x-token: given twice, in two spellings`},
	} {
		_, err := destinations.CheckEntry(tc.e)
		var fe *destinations.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want field %s and %q...", tc.e, err, tc.field, tc.want)
		}
	}
}

// An entry's rate and order_by are the file's: checked by the same rules,
// refused in the same words naming the field; a rate of 0 is none, as a
// file's rate left out, and both are part of the set's hash.
func TestCheckEntry_RateAndOrderBy(t *testing.T) {
	t.Parallel()
	d, err := destinations.CheckEntry(destinations.Entry{Name: "billing", URL: "https://billing.internal/stripe",
		Rate: 2.5, OrderBy: "data.object.customer"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Rate != 2.5 || d.OrderBy != "data.object.customer" {
		t.Errorf("billing: rate %v, order_by %q; want 2.5, data.object.customer", d.Rate, d.OrderBy)
	}
	d, err = destinations.CheckEntry(destinations.Entry{Name: "crm", URL: "https://crm.internal"})
	if err != nil || d.Rate != 0 || d.OrderBy != "" {
		t.Errorf("crm without either: %v, rate %v, order_by %q", err, d.Rate, d.OrderBy)
	}
	for _, tc := range []struct {
		e    destinations.Entry
		file string
		want string
	}{
		{destinations.Entry{Name: "b", URL: "http://x", Rate: -1}, "rate: -1",
			`destination "b": rate: -1 is not a number of calls a second greater than zero (leave it out for no bound)`},
		{destinations.Entry{Name: "b", URL: "http://x", Rate: math.Inf(1)}, "rate: .inf",
			`destination "b": rate: +Inf is not a number of calls a second greater than zero (leave it out for no bound)`},
		{destinations.Entry{Name: "b", URL: "http://x", Rate: math.NaN()}, "rate: .nan",
			`destination "b": rate: NaN is not a number of calls a second greater than zero (leave it out for no bound)`},
		{destinations.Entry{Name: "b", URL: "http://x", OrderBy: "data.object..customer"}, "order_by: data.object..customer",
			`destination "b": order_by: "data.object..customer" is not a field path like data.object.customer`},
		{destinations.Entry{Name: "b", URL: "http://x", OrderBy: "data.object.customer "}, "order_by: \"data.object.customer \"",
			`destination "b": order_by: "data.object.customer " is not a field path like data.object.customer`},
	} {
		_, err := destinations.CheckEntry(tc.e)
		var fe *destinations.FieldError
		if !errors.As(err, &fe) || fe.Field != strings.SplitN(tc.file, ":", 2)[0] || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.e, err, tc.want)
		}
		// The file's destination of the same value is refused alike.
		_, ferr := destinations.Parse([]byte("destinations:\n  - name: b\n    url: http://x\n    "+tc.file+"\n"), nil)
		if ferr == nil || !strings.Contains(ferr.Error(), tc.want) {
			t.Errorf("the file's %s: %v, want %q", tc.file, ferr, tc.want)
		}
	}
	one, _ := destinations.FromEntries([]destinations.Entry{{Name: "b", URL: "http://x"}}, destinations.SourceDashboard)
	rated, _ := destinations.FromEntries([]destinations.Entry{{Name: "b", URL: "http://x", Rate: 1}}, destinations.SourceDashboard)
	ordered, _ := destinations.FromEntries([]destinations.Entry{{Name: "b", URL: "http://x", OrderBy: "data.object.id"}},
		destinations.SourceDashboard)
	if one.Hash == rated.Hash || one.Hash == ordered.Hash || rated.Hash == ordered.Hash {
		t.Errorf("hashes: none %s, rate %s, order_by %s: each setting is to change it", one.Hash, rated.Hash, ordered.Hash)
	}
}

// FromEntries is a set as the file's: in order, a name given twice
// refused; a new secret value is a new hash, as a new setting is.
func TestFromEntries_HashFollowsTheValues(t *testing.T) {
	t.Parallel()
	entries := []destinations.Entry{{Name: "default", URL: "https://app.example/hook", Source: destinations.SourceForwardURL},
		{Name: "billing", URL: "https://billing.internal", SigningSecrets: []string{secretNew}, Source: destinations.SourceDashboard}}
	set, err := destinations.FromEntries(entries, destinations.SourceDashboard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Names(), []string{"default", "billing"}) || set.Get("default").Source != destinations.SourceForwardURL ||
		set.Get("billing").Source != destinations.SourceDashboard {
		t.Errorf("set: %+v", set)
	}
	entries[1].SigningSecrets = []string{secretOld}
	other, err := destinations.FromEntries(entries, destinations.SourceDashboard)
	if err != nil || other.Hash == set.Hash {
		t.Errorf("a new secret: %v, hash %s, unchanged", err, other.Hash)
	}
	alone, err := destinations.FromEntries(entries[:1], destinations.SourceForwardURL)
	if err != nil || alone.Hash != destinations.Single("https://app.example/hook").Hash {
		t.Errorf("HOOKD_FORWARD_URL's default alone: %v, hash %s, want Single's", err, alone.Hash)
	}
	entries[1].Name = "default"
	if _, err := destinations.FromEntries(entries, destinations.SourceDashboard); err == nil ||
		err.Error() != `destination "default": name: used by destinations[0] too` {
		t.Errorf("default twice: %v", err)
	}
}

// A value sealed opens with its key, for its destination and kind alone;
// the key is base64 of 32 bytes.
func TestSeal_OpensWithItsKeyAlone(t *testing.T) {
	t.Parallel()
	raw := make([]byte, destinations.KeySize)
	_, _ = rand.Read(raw)
	key, err := destinations.ParseKey(" " + base64.StdEncoding.EncodeToString(raw) + "\n")
	if err != nil || !bytes.Equal(key, raw) {
		t.Fatalf("ParseKey: %v", err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(raw[:16])} {
		if _, err := destinations.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	a, err := destinations.Seal(key, "billing", "headers", []byte(`{"Authorization":"Bearer b"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := destinations.Seal(key, "billing", "headers", []byte(`{"Authorization":"Bearer b"}`))
	if bytes.Equal(a, b) || bytes.Contains(a, []byte("Bearer")) {
		t.Errorf("two seals of one value: equal %v, or in the clear", bytes.Equal(a, b))
	}
	if plain, err := destinations.Open(key, "billing", "headers", a); err != nil || string(plain) != `{"Authorization":"Bearer b"}` {
		t.Errorf("Open: %q, %v", plain, err)
	}
	other := slices.Clone(key)
	other[0] ^= 1
	for name, open := range map[string]func() ([]byte, error){
		"another key":         func() ([]byte, error) { return destinations.Open(other, "billing", "headers", a) },
		"another destination": func() ([]byte, error) { return destinations.Open(key, "crm", "headers", a) },
		"another kind":        func() ([]byte, error) { return destinations.Open(key, "billing", "signing_secrets", a) },
		"too short":           func() ([]byte, error) { return destinations.Open(key, "billing", "headers", a[:5]) },
	} {
		if _, err := open(); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	if _, err := destinations.Seal(nil, "billing", "headers", []byte("x")); !errors.Is(err, destinations.ErrNoKey) {
		t.Errorf("Seal without a key: %v", err)
	}
}
