package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
)

// While the live replicas apply different destinations every page shows a
// banner saying how many apply which; once they agree it goes.
func TestReplicasBanner_OnEveryPageWhileReplicasDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	pages := []string{"/", "/events?status=dead", "/events?status=pending", "/failures", "/rejections", "/search", "/audit"}
	var replicas []*queue.Store
	replica := func(hash string) *queue.Store {
		s := queue.New(b.pool, queue.WithReplica(uuid.New()))
		if err := s.Register(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyDestinations(ctx, nil, hash); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
		return s
	}
	banner := func(path string) string {
		// The replicas beat as running ones do: on a slow machine, one
		// that did not would fall silent, and no longer count.
		for _, s := range replicas {
			if _, err := s.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r := c.get(path)
		wantStatus(t, r, http.StatusOK)
		return testid(r.doc, "replicas-banner")
	}

	replica("aaaa1111aaaa1111")
	for _, path := range pages {
		if text := banner(path); text != "" {
			t.Errorf("%s: banner %q with one replica", path, text)
		}
	}
	replica("aaaa1111aaaa1111")
	other := replica("bbbb2222bbbb2222")
	const want = "Replicas apply different destinations: 2 apply destinations aaaa1111aaaa, 1 applies destinations bbbb2222bbbb."
	eventually(t, "the banner says the replicas differ", func() bool { return strings.Contains(banner("/"), want) })
	for _, path := range pages {
		if text := banner(path); !strings.Contains(text, want) || !strings.Contains(text, "HOOKD_DESTINATIONS_FILE") {
			t.Errorf("%s: banner %q, want %q and what to do", path, text, want)
		}
	}

	if _, err := other.ApplyDestinations(ctx, nil, "aaaa1111aaaa1111"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the banner goes once the replicas agree", func() bool { return banner("/") == "" })
}
