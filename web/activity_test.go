package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
)

func TestOverview_ChartsDrawTheCountsWithTextAlternatives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Two replicas' rows in the current minute and one three minutes ago;
	// one more three hours ago, on the 7-day chart only.
	if _, err := b.pool.Exec(t.Context(), `
		INSERT INTO activity_minutes (minute, replica, received, processed, queued, retried, dead, rejected, bad_signature) VALUES
		  (date_trunc('minute', now()), 'a', 5, 3, 2, 0, 0, 0, 0),
		  (date_trunc('minute', now()), 'b', 7, 7, 0, 4, 1, 0, 0),
		  (date_trunc('minute', now()) - interval '3 minutes', 'a', 2, 0, 0, 0, 0, 2, 2),
		  (date_trunc('minute', now()) - interval '3 hours', 'a', 100, 0, 0, 0, 0, 0, 0);
		INSERT INTO activity_hours (hour, replica, received, processed, queued, retried, dead, rejected, bad_signature)
		SELECT date_bin('1 hour', minute, timestamptz 'epoch'), replica, sum(received), sum(processed), sum(queued),
		       sum(retried), sum(dead), sum(rejected), sum(bad_signature)
		FROM activity_minutes GROUP BY 1, 2`); err != nil {
		t.Fatal(err)
	}
	c := b.client(t)
	c.signIn(accounts.RoleViewer)

	for _, tc := range []struct {
		path          string
		bars          int
		totals        map[string]string
		currentBucket string
	}{
		{"/", 60, map[string]string{"received": "14", "processed": "10", "queued": "2", "retried": "4", "dead": "1", "rejected": "2"}, "Last hour"},
		{"/?activity=week", 168, map[string]string{"received": "114", "processed": "10", "queued": "2", "retried": "4", "dead": "1", "rejected": "2"}, "Last 7 days"},
		{"/overview/activity?activity=week", 168, map[string]string{"received": "114"}, "Last 7 days"},
	} {
		r := c.get(tc.path)
		wantStatus(t, r, http.StatusOK)
		panel := r.doc.Find("#activity")
		if panel.Length() != 1 {
			t.Fatalf("GET %s: no #activity panel", tc.path)
		}
		if got := strings.TrimSpace(panel.Find(`.tabs a[aria-current="page"]`).Text()); got != tc.currentBucket {
			t.Errorf("GET %s: current tab %q, want %q", tc.path, got, tc.currentBucket)
		}
		if n := panel.Find("figure.chart").Length(); n != 6 {
			t.Errorf("GET %s: %d charts, want 6", tc.path, n)
		}
		for key, want := range tc.totals {
			if got := testid(r.doc, "chart-"+key+"-total"); got != want {
				t.Errorf("GET %s: %s total %q, want %q", tc.path, key, got, want)
			}
		}
		panel.Find("svg.chart-svg").Each(func(_ int, svg *goquery.Selection) {
			if role, _ := svg.Attr("role"); role != "img" {
				t.Errorf("GET %s: svg role %q, want img", tc.path, role)
			}
			label, _ := svg.Attr("aria-labelledby")
			desc, _ := svg.Attr("aria-describedby")
			if r.doc.Find("#"+label).Length() != 1 || strings.TrimSpace(r.doc.Find("#"+desc).Text()) == "" {
				t.Errorf("GET %s: svg labelled by %q and described by %q: want both present", tc.path, label, desc)
			}
			rects := svg.Find("rect")
			if rects.Length() != tc.bars {
				t.Errorf("GET %s: %d bars, want %d", tc.path, rects.Length(), tc.bars)
			}
			rects.Each(func(i int, rect *goquery.Selection) {
				if strings.TrimSpace(rect.Find("title").Text()) == "" {
					t.Errorf("GET %s: bar %d has no <title>", tc.path, i)
				}
			})
		})
		if rows := panel.Find(`[data-testid="activity-table"] tbody tr`).Length(); rows != tc.bars {
			t.Errorf("GET %s: table has %d rows, want %d", tc.path, rows, tc.bars)
		}
	}

	// The bar of the current minute (or the one before, should the minute
	// have turned since) says what it counts; the summary names the total.
	r := c.get("/")
	titles := r.doc.Find(`[data-testid="chart-received"] rect title`)
	var found bool
	titles.Slice(titles.Length()-2, titles.Length()).Each(func(_ int, s *goquery.Selection) {
		found = found || strings.HasSuffix(s.Text(), " UTC: 12 received")
	})
	if !found {
		t.Errorf("no bar of the last two minutes is titled \"HH:MM UTC: 12 received\"")
	}
	if got := r.doc.Find("#chart-dead-summary").Text(); !strings.Contains(got, "Dead per minute over the last hour: 1 in all") {
		t.Errorf("dead chart summary %q", got)
	}
	if got, _ := r.doc.Find("#activity").Attr("hx-get"); got != "/overview/activity?activity=hour" {
		t.Errorf("charts refresh from %q, want /overview/activity?activity=hour", got)
	}
}

func TestOverview_ChartsFragmentNeedsASession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.client(t).get("/overview/activity")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
		t.Fatalf("status %d, Location %q; want a redirect to /login", r.status, r.header.Get("Location"))
	}
}
