package endpoint_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/endpoint"
)

func configured(t *testing.T, settings string) []endpoint.Endpoint {
	t.Helper()
	eps, err := endpoint.ParseSecrets("account=whsec_a;learned=whsec_l")
	if err != nil {
		t.Fatal(err)
	}
	if err := endpoint.Configure(eps, settings); err != nil {
		t.Fatal(err)
	}
	return eps
}

func TestLearned(t *testing.T) {
	t.Parallel()
	eps := configured(t, "account:stripe_id=we_1")
	account, learned := eps[0], eps[1]
	if account.Undeclared || !learned.Undeclared {
		t.Fatalf("Undeclared: account %v, learned %v; want false, true", account.Undeclared, learned.Undeclared)
	}
	cases := []struct {
		name        string
		ep          endpoint.Endpoint
		arrived     endpoint.Arrived
		wantKind    endpoint.Kind
		wantConnect bool
	}{
		{"UndeclaredReceivingThinEventsIsThin", learned, endpoint.Arrived{Thin: true}, endpoint.Thin, false},
		{"UndeclaredReceivingBothStaysSnapshot", learned, endpoint.Arrived{Thin: true, Snapshot: true}, endpoint.Snapshot, false},
		{"UndeclaredReceivingConnectEventsIsConnect", learned, endpoint.Arrived{Snapshot: true, Connect: true}, endpoint.Snapshot, true},
		{"DeclaredStaysAsDeclared", account, endpoint.Arrived{Thin: true, Connect: true}, endpoint.Snapshot, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := c.ep.Learned(c.arrived)
			if got.Kind != c.wantKind || got.Connect != c.wantConnect {
				t.Errorf("kind %s, connect %v; want %s, %v", got.Kind, got.Connect, c.wantKind, c.wantConnect)
			}
		})
	}
}

func TestContradictions(t *testing.T) {
	t.Parallel()
	eps := configured(t, "account:stripe_id=we_1;learned:kind=thin")
	account := eps[0]
	thin := eps[1]
	undeclared := endpoint.New("other")
	undeclared.Undeclared = true
	cases := []struct {
		name    string
		ep      endpoint.Endpoint
		arrived endpoint.Arrived
		want    []string
	}{
		{"ConnectEventsThroughEndpointNotDeclaredConnect", account, endpoint.Arrived{Snapshot: true, Connect: true},
			[]string{"endpoint `account` receives Connect events but is not declared `connect=true`: reconciliation lists no connected account for it"}},
		{"ThinEventsThroughSnapshotEndpoint", account, endpoint.Arrived{Thin: true}, []string{"endpoint `account` receives thin events"}},
		{"SnapshotEventsThroughThinEndpoint", thin, endpoint.Arrived{Snapshot: true}, []string{"endpoint `learned` receives snapshot events"}},
		{"WhatIsDeclaredArrives", thin, endpoint.Arrived{Thin: true}, nil},
		{"AnUndeclaredEndpointLearnsInstead", undeclared, endpoint.Arrived{Thin: true, Snapshot: true, Connect: true}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := c.ep.Contradictions(c.arrived)
			if len(got) != len(c.want) || !slices.EqualFunc(got, c.want, strings.HasPrefix) {
				t.Errorf("got %q, want sentences starting %q", got, c.want)
			}
		})
	}
}
