package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// notOnThePages are the words SPEC.md's glossary keeps off the pages: the
// code's own, which a support person does not use.
var notOnThePages = regexp.MustCompile(`(?i)\b(processed markers?|markers?|deferred|stuck|claimed|leases?d?|in flight|rejected|failed, first retry|first retry pending)\b`)

// The pages speak a support person's words (SPEC.md's glossary): with an
// event being delivered, one whose tries never came back, one overdue,
// none of the overview, the lists, an event's page, Find an event, the
// prune confirmation, the accounts page or the destinations page says markers, deferred, stuck,
// claimed, lease, in flight, rejected, or failed as an event's state.
func TestPages_SpeakTheGlossarysWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := b.store.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	running := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_running", Status: queue.StatusRetrying, Attempts: 1})
	claimOne(t, b)
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_overdue", DueIn: -10 * time.Minute})
	noAnswer := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_no_answer", DueIn: time.Minute})
	if _, err := b.pool.Exec(ctx, `UPDATE webhook_events SET claims = 3 WHERE id = $1`, noAnswer.ID); err != nil {
		t.Fatal(err)
	}

	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "default", Source: "forward_url"})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	pages := map[string]response{}
	for _, path := range []string{"/", "/events?status=pending", "/events?status=failed", "/events?status=pending&stuck=1", "/events/" + running.ID.String(),
		"/events/" + noAnswer.ID.String(), "/search?q=evt_running", "/accounts", "/destinations"} {
		pages[path] = c.get(path)
	}
	c.get("/")
	pages["prune confirmation"] = c.post("/prune/preview", url.Values{"days": {"30"}})
	for name, r := range pages {
		wantStatus(t, r, http.StatusOK)
		r.doc.Find("script, style").Remove()
		if words := notOnThePages.FindAllString(r.doc.Find("body").Text(), -1); len(words) > 0 {
			t.Errorf("%s says %q, words the glossary keeps off the pages", name, words)
		}
	}
}
