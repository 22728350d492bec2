package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// A support person on a phone reads the overview's charts: what hookd
// received, processed, queued and rejected in the last hour and the last 7
// days, in bars that fit the screen and in words for a screen reader.
func TestChartsOnAPhone(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	h.sendEvents(t, 3, "invoice.paid")
	h.downstream.setFailing(true)
	h.sendEvents(t, 2, "invoice.paid")
	h.postUnsigned(t)

	page := h.newPage(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 390, Height: 844},
		IsMobile: playwright.Bool(true),
		HasTouch: playwright.Bool(true),
	})
	h.signIn(t, page)

	step(t, "TheLastHourShowsWhatHappened", func(t *testing.T) {
		// Each replica adds its counts to the database every few seconds;
		// the charts redraw themselves every 30, so reload until they show.
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := page.GetByTestId("chart-received-total").TextContent()
			must(t, err, "read the received total")
			if strings.TrimSpace(got) == "6" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("received total %q 30 s after the deliveries, want 6", got)
			}
			_, err = page.Reload()
			must(t, err, "reload the overview")
		}
		for key, want := range map[string]string{"processed": "3", "queued": "2", "rejected": "1"} {
			must(t, expect.Locator(page.GetByTestId("chart-"+key+"-total")).ToHaveText(want), key+" total")
		}
	})

	step(t, "TheChartsFitThePhoneAndEveryBarHasWords", func(t *testing.T) {
		widths, err := page.Evaluate(`() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
		must(t, err, "measure the page")
		w := widths.([]any)
		if scroll, client := toInt(w[0]), toInt(w[1]); scroll > client {
			t.Errorf("overview scrolls sideways at 390 px: scrollWidth %d > clientWidth %d", scroll, client)
		}
		charts, err := page.Locator("svg.chart-svg").All()
		must(t, err, "find the charts")
		if len(charts) != 6 {
			t.Fatalf("%d charts, want 6", len(charts))
		}
		for i, c := range charts {
			must(t, c.ScrollIntoViewIfNeeded(), fmt.Sprintf("scroll to chart %d", i))
			box, err := c.BoundingBox()
			must(t, err, "measure a chart")
			if box.X < 0 || box.X+box.Width > 390 || box.Width < 200 {
				t.Errorf("chart %d spans x %.0f to %.0f: want it within the 390 px screen and wide enough to read", i, box.X, box.X+box.Width)
			}
		}
		// Screen readers get each chart as an image named by its caption,
		// described by a summary, and the numbers as a table.
		received := page.GetByRole("img", playwright.PageGetByRoleOptions{Name: regexp.MustCompile(`^Received 6\b`)})
		must(t, expect.Locator(received).ToHaveCount(1), "the received chart is an image named by its caption")
		must(t, expect.Locator(received).ToHaveAccessibleDescription(regexp.MustCompile(`Received per minute over the last hour: 6 in all`)), "its summary")
		untitled, err := page.Evaluate(`() => [...document.querySelectorAll('svg.chart-svg rect')].filter(r => !r.querySelector('title')?.textContent.trim()).length`)
		must(t, err, "count bars without a title")
		if toInt(untitled) != 0 {
			t.Errorf("%d bars have no <title>", toInt(untitled))
		}
		bars, err := page.Locator("svg.chart-svg rect").Count()
		must(t, err, "count the bars")
		if bars != 6*60 {
			t.Errorf("%d bars, want 60 minutes for each of the 6 charts", bars)
		}
		table := page.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Activity per minute over the last hour"})
		must(t, expect.Locator(table.GetByRole("row")).ToHaveCount(61), "the table: a header and 60 minutes")
	})

	step(t, "TheLast7DaysByTheHour", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Last 7 days"}), "Last 7 days")
		must(t, expect.Page(page).ToHaveURL(h.url("/?activity=week")), "on the 7-day charts")
		must(t, expect.Locator(page.GetByTestId("chart-received-total")).ToHaveText("6"), "received over 7 days")
		must(t, expect.Locator(page.Locator(`[data-testid="chart-received"] rect`)).ToHaveCount(168), "one bar per hour")
		widths, err := page.Evaluate(`() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
		must(t, err, "measure the page")
		w := widths.([]any)
		if scroll, client := toInt(w[0]), toInt(w[1]); scroll > client {
			t.Errorf("7-day charts scroll sideways at 390 px: scrollWidth %d > clientWidth %d", scroll, client)
		}
	})
}

// postUnsigned posts an event without a signature, which hookd must refuse
// with a 400.
func (h *hookd) postUnsigned(t *testing.T) {
	t.Helper()
	resp, err := http.Post(h.url("/webhooks/stripe"), "application/json", bytes.NewReader([]byte(`{"id":"evt_forged","type":"invoice.paid"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unsigned delivery: got %d, want 400", resp.StatusCode)
	}
}
