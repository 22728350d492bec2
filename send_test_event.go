package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/worker/stripeevent"
)

// sendTestEvent posts realistic, correctly signed Stripe events to a hookd
// receiver and prints each answer: one event checks a deployment end to end
// without a Stripe account at hand; -n 50 feeds the demo a day's mix.
func sendTestEvent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("send-test-event", "Signs each event with the first secret of $STRIPE_WEBHOOK_SECRET.", stderr)
	eventType := fs.String("type", "", "the events' type (default: invoice.paid for one event, a realistic mix for more)")
	count := fs.Int("n", 1, "how many events to send")
	target := fs.String("url", "http://localhost:8080"+stripeevent.ReceiverPath, "the receiver to post to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *count < 1 {
		return fmt.Errorf("-n: must be at least 1 (got %d)", *count)
	}
	var secrets []Secret
	if err := parseSecrets(&secrets, getenv("STRIPE_WEBHOOK_SECRET")); err != nil {
		return fmt.Errorf("STRIPE_WEBHOOK_SECRET: %v", err)
	}
	if len(secrets) == 0 {
		return errors.New("STRIPE_WEBHOOK_SECRET: set it to the receiver's signing secret")
	}
	typeOf := func(i int) string {
		switch {
		case *eventType != "":
			return *eventType
		case *count == 1:
			return "invoice.paid"
		}
		return stripeevent.Mix(i)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	if *count == 1 {
		res := postTestEvent(ctx, client, *target, secrets[0], typeOf(0))
		if res.err != nil {
			return res.err
		}
		fmt.Fprintf(stdout, "sent %s (%s) to %s\n%s: %s\n", res.id, res.eventType, *target, res.status, res.body)
		if res.code != http.StatusOK {
			return fmt.Errorf("the receiver answered %s", res.status)
		}
		return nil
	}

	return sendTestEvents(ctx, client, *target, secrets[0], *count, typeOf, stdout)
}

// sendTestEvents posts count events, printing each answer and then how
// many got which.
func sendTestEvents(ctx context.Context, client *http.Client, target string, secret Secret, count int,
	typeOf func(i int) string, stdout io.Writer) error {
	// Stripe delivers several events at once; so does this, a few at a
	// time, printing each answer as it comes.
	const senders = 4
	var (
		mu      sync.Mutex
		answers = map[string]int{}
		failed  int
		next    int
		wg      sync.WaitGroup
	)
	fmt.Fprintf(stdout, "sending %d events to %s\n", count, target)
	for range senders {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= count || ctx.Err() != nil {
					return
				}
				res := postTestEvent(ctx, client, target, secret, typeOf(i))
				mu.Lock()
				if res.err != nil {
					failed++
					answers["not sent"]++
					fmt.Fprintf(stdout, "%-30s %s\n", res.eventType, res.err)
				} else {
					answer := res.body
					if res.code != http.StatusOK {
						failed++
						answer = res.status + " " + res.body
					}
					answers[answer]++
					fmt.Fprintf(stdout, "%-30s %s  %s: %s\n", res.eventType, res.id, res.status, res.body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(stdout, "sent %d events: %s\n", count, summarizeAnswers(answers))
	if err := ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d events were not answered 200", failed, count)
	}
	return nil
}

type testEventResult struct {
	id, eventType, status, body string
	code                        int
	err                         error
}

// postTestEvent signs and posts one sample event of eventType.
func postTestEvent(ctx context.Context, client *http.Client, target string, secret Secret, eventType string) testEventResult {
	res := testEventResult{eventType: eventType}
	payload, id, err := stripeevent.Sample(eventType, "hookd send-test-event", time.Now())
	if err != nil {
		res.err = fmt.Errorf("-type: %v", err)
		return res
	}
	res.id = id
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		res.err = fmt.Errorf("-url: %v", err)
		return res
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, secret.Reveal(), time.Now()))
	resp, err := client.Do(req)
	if err != nil {
		res.err = fmt.Errorf("send %s: %w", id, err)
		return res
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	res.code, res.status, res.body = resp.StatusCode, resp.Status, strings.TrimSpace(string(body))
	return res
}

// summarizeAnswers says how many events got each answer, most first:
// "38 processed, 12 queued".
func summarizeAnswers(answers map[string]int) string {
	type answer struct {
		body string
		n    int
	}
	var list []answer
	for body, n := range answers {
		list = append(list, answer{body, n})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].body < list[j].body
	})
	parts := make([]string, 0, len(list))
	for _, a := range list {
		parts = append(parts, fmt.Sprintf("%d %s", a.n, a.body))
	}
	return strings.Join(parts, ", ")
}
