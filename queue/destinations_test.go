package queue_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// Applying a configuration writes each destination and keeps its pause;
// one taken out is retired while a delivery to it waits on the queue, and
// removed when none does; configured again, it is retired no more.
func TestApplyDestinations_RetiresWhatStillHasDeliveries(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	dest := func(name string) queue.AppliedDestination {
		return queue.AppliedDestination{Name: name, URL: "http://" + name + ".internal/stripe",
			Route: map[string]any{"types": []string{"*"}}, Source: queue.SourceDestinationsFile}
	}
	if _, err := s.ApplyDestinations(ctx, []queue.AppliedDestination{dest("billing"), dest("crm"), dest("analytics")}, "h1"); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE destinations SET paused_at = now(), paused_by = 'ana', paused_reason = 'deploy'
		WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_1", EventType: "invoice.paid",
		Payload: []byte(`{"id":"evt_1"}`), Error: "HTTP 500", Destination: "crm"}
	if _, err := queuetest.NewSeed(s).Enqueue(ctx, fe); err != nil {
		t.Fatal(err)
	}

	got, err := s.ApplyDestinations(ctx, []queue.AppliedDestination{dest("billing")}, "h2")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Retired, []string{"crm"}) || !slices.Equal(got.Removed, []string{"analytics"}) {
		t.Fatalf("retired %v, removed %v; want [crm], [analytics]", got.Retired, got.Removed)
	}
	states, err := s.DestinationStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]queue.DestinationState{}
	for _, st := range states {
		byName[st.Name] = st
	}
	if len(byName) != 2 || !byName["billing"].Paused() || byName["billing"].RetiredAt != nil || byName["crm"].RetiredAt == nil {
		t.Fatalf("states after the second apply: %+v", byName)
	}

	if _, err := s.ApplyDestinations(ctx, []queue.AppliedDestination{dest("billing"), dest("crm")}, "h3"); err != nil {
		t.Fatal(err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM destinations WHERE retired_at IS NOT NULL`); n != 0 {
		t.Errorf("%d destinations retired after crm was configured again", n)
	}
}

// Each live replica's hash is read; a replica silent past ReplicaSilence
// is not live, and one that applied nothing is counted apart.
func TestReplicaDestinationHashes_GroupsTheLiveReplicas(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	ctx := t.Context()
	apply := func(hash string) *queue.Store {
		s := queue.New(bundle.pool, queue.WithReplica(uuid.New()))
		if err := s.Register(ctx); err != nil {
			t.Fatal(err)
		}
		if hash != "" {
			if _, err := s.ApplyDestinations(ctx, nil, hash); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	apply("aaaa1111aaaa1111")
	apply("aaaa1111aaaa1111")
	apply("bbbb2222bbbb2222")
	apply("")
	silent := apply("cccc3333cccc3333")
	if _, err := bundle.pool.Exec(ctx, `UPDATE hookd_replicas SET beat_at = now() - interval '1 minute' WHERE id = $1`,
		silent.Replica()); err != nil {
		t.Fatal(err)
	}

	hashes, err := apply("").ReplicaDestinationHashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hashes) != 5 {
		t.Fatalf("%d live replicas read, want 5: %v", len(hashes), hashes)
	}
	groups, unapplied := queue.GroupDestinationHashes(hashes)
	want := []queue.HashGroup{{Hash: "aaaa1111aaaa1111", Replicas: 2}, {Hash: "bbbb2222bbbb2222", Replicas: 1}}
	if !slices.Equal(groups, want) || unapplied != 2 {
		t.Errorf("groups %v, %d unapplied; want %v, 2", groups, unapplied, want)
	}
	if got := queue.ShortHash("aaaa1111aaaa1111"); got != "aaaa1111aaaa" {
		t.Errorf("ShortHash: %q", got)
	}
}
