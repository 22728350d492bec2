package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/demoapp"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/internal/stripeevent"
)

// sendTestEvent posts realistic, correctly signed Stripe events to a hookd
// receiver and prints each answer: one event checks a deployment end to end
// without a Stripe account at hand; -n 50 feeds the demo a day's mix.
func sendTestEvent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := config.NewFlagSet("send-test-event", "Signs each event with the first secret of $STRIPE_WEBHOOK_SECRET, or of -endpoint's in $STRIPE_WEBHOOK_SECRETS.", stderr)
	eventType := fs.String("type", "", "the events' type, with -thin either customer.created or v1.customer.created (default: invoice.paid for one event, a realistic mix for more)")
	count := fs.Int("n", 1, "how many events to send")
	target := fs.String("url", "http://localhost:8080"+stripeevent.ReceiverPath, "the receiver to post to")
	label := fs.String("endpoint", "", "the endpoint of $STRIPE_WEBHOOK_SECRETS whose secret signs the events (default: $STRIPE_WEBHOOK_SECRET's, or the first endpoint's)")
	var kind testEventKind
	fs.BoolVar(&kind.thin, "thin", false, "send thin events (v1.<type>, as an event destination of thin events sends them)")
	fs.StringVar(&kind.account, "account", "", "send the events of this connected account (acct_...), as a Connect endpoint receives them")
	fs.BoolVar(&kind.ping, "ping", false, "send "+stripeevent.PingType+", Stripe's check of an event destination")
	fs.BoolVar(&kind.notice, "generation-failure", false, "send "+stripeevent.GenerationFailureType+", Stripe's notice of an event it could not create")
	outageFor := fs.Duration("outage", 0, "first take the demo app at $HOOKD_FORWARD_URL down for this long (e.g. 60s), so the events find the app down and hookd's circuit breaker opens")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *count < 1 {
		return fmt.Errorf("-n: must be at least 1 (got %d)", *count)
	}
	if kind.account != "" && !strings.HasPrefix(kind.account, "acct_") {
		return fmt.Errorf("-account: a connected account's id starts with acct_ (got %q)", kind.account)
	}
	if kind.ping && kind.notice {
		return errors.New("-ping and -generation-failure: choose one")
	}
	secret, err := testEventSecret(getenv, *label)
	if err != nil {
		return err
	}

	client := &http.Client{Timeout: 30 * time.Second}
	if *outageFor != 0 {
		if err := startDemoOutage(ctx, client, getenv, *outageFor, stdout); err != nil {
			return err
		}
	}
	typeOf := kind.types(*eventType, *count)
	if *count == 1 {
		return sendOneTestEvent(ctx, client, *target, secret, kind, typeOf(0), stdout)
	}
	return sendTestEvents(ctx, client, *target, secret, kind, *count, typeOf, stdout)
}

// types returns the type of the i-th of count events of kind: a ping or a
// notice when kind is one, eventType when it is set, otherwise
// invoice.paid for one event and a realistic mix for more.
func (kind testEventKind) types(eventType string, count int) func(i int) string {
	return func(i int) string {
		switch {
		case kind.ping:
			return stripeevent.PingType
		case kind.notice:
			return stripeevent.GenerationFailureType
		case eventType != "":
			return eventType
		case count == 1:
			return "invoice.paid"
		}
		return stripeevent.Mix(i)
	}
}

// sendOneTestEvent posts one event of eventType and prints the answer,
// which must be a 200.
func sendOneTestEvent(ctx context.Context, client *http.Client, target string, secret config.Secret, kind testEventKind,
	eventType string, stdout io.Writer) error {
	res := postTestEvent(ctx, client, target, secret, kind, eventType)
	if res.err != nil {
		return res.err
	}
	fmt.Fprintf(stdout, "sent %s (%s) to %s\n%s: %s\n", res.id, res.eventType, target, res.status, res.body)
	if res.code != http.StatusOK {
		return fmt.Errorf("the receiver answered %s", res.status)
	}
	return nil
}

// startDemoOutage asks the demo app where HOOKD_FORWARD_URL points to be
// down for d, signing the request with HOOKD_FORWARD_SECRET as hookd signs
// a delivery.
func startDemoOutage(ctx context.Context, client *http.Client, getenv func(string) string, d time.Duration,
	stdout io.Writer) error {
	if d <= 0 || d > demoapp.MaxOutage {
		return fmt.Errorf("-outage: between 1s and %s (got %s)", demoapp.MaxOutage, d)
	}
	cfg, err := config.ReadSettings(getenv, "HOOKD_FORWARD_URL", "HOOKD_FORWARD_SECRET")
	if err != nil {
		return err
	}
	u, err := url.Parse(cfg.ForwardURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-outage: HOOKD_FORWARD_URL must say where the demo app listens (got %q)", cfg.ForwardURL)
	}
	target := u.Scheme + "://" + u.Host + demoapp.OutagePath
	body := []byte(d.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("-outage: %w", err)
	}
	if key, _ := forwardsig.ParseSecret(cfg.ForwardSecret.Reveal()); key != nil {
		forwardsig.Sign(req.Header, key, "demo_outage_"+strconv.FormatInt(time.Now().UnixNano(), 10), time.Now(), body)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("-outage: is the demo app running (make run)? %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("-outage: the demo app at %s answered %s: %s", target, resp.Status, strings.TrimSpace(string(answer)))
	}
	fmt.Fprint(stdout, string(answer))
	return nil
}

// testEventKind is what sort of event send-test-event sends.
type testEventKind struct {
	thin, ping, notice bool
	// account is the connected account of a Connect event; "" for none.
	account string
}

// testEventSecret is the secret that signs: the first of label's in
// STRIPE_WEBHOOK_SECRETS, or of STRIPE_WEBHOOK_SECRET, or of the first
// endpoint of STRIPE_WEBHOOK_SECRETS.
func testEventSecret(getenv func(string) string, label string) (config.Secret, error) {
	cfg, err := config.ReadSettings(getenv, "STRIPE_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRETS")
	if err != nil {
		return "", err
	}
	eps, secrets := cfg.Endpoints, cfg.StripeSecrets
	if label != "" {
		if len(eps) == 0 && label == endpoint.DefaultLabel {
			label = ""
		} else {
			ep, err := endpoint.Find(eps, label)
			if err != nil {
				return "", fmt.Errorf("-endpoint: %v in STRIPE_WEBHOOK_SECRETS", err)
			}
			return config.Secret(ep.Secrets[0]), nil
		}
	}
	switch {
	case len(secrets) > 0:
		return secrets[0], nil
	case len(eps) > 0:
		return config.Secret(eps[0].Secrets[0]), nil
	}
	return "", errors.New("STRIPE_WEBHOOK_SECRET: set it to the receiver's signing secret (or STRIPE_WEBHOOK_SECRETS, and -endpoint)")
}

// sendTestEvents posts count events, printing each answer and then how
// many got which.
func sendTestEvents(ctx context.Context, client *http.Client, target string, secret config.Secret, kind testEventKind, count int,
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
				res := postTestEvent(ctx, client, target, secret, kind, typeOf(i))
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

// postTestEvent signs and posts one sample event of eventType, of kind.
func postTestEvent(ctx context.Context, client *http.Client, target string, secret config.Secret, kind testEventKind, eventType string) testEventResult {
	res := testEventResult{eventType: eventType}
	payload, id, sentType, err := testEventPayload(kind, eventType)
	if err != nil {
		res.err = fmt.Errorf("-type: %v", err)
		return res
	}
	res.id, res.eventType = id, sentType
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

// testEventPayload builds one event of kind, and says its type as the app
// receives it: a thin event's is v1.<type>, a ping's and a notice's
// Stripe's own.
func testEventPayload(kind testEventKind, eventType string) (payload []byte, id, sentType string, err error) {
	now := time.Now()
	switch {
	case kind.ping:
		payload, id = stripeevent.SamplePing(stripeevent.NewID("ed"))
		return payload, id, stripeevent.PingType, nil
	case kind.notice:
		id = stripeevent.NewID("evt")
		return stripeevent.GenerationFailure(id), id, stripeevent.GenerationFailureType, nil
	case kind.thin:
		// A thin event's type is v1.<type>: -type takes either.
		eventType = strings.TrimPrefix(eventType, "v1.")
		if eventType == "" {
			return nil, "", "", errors.New("event type must not be empty")
		}
		payload, id = stripeevent.SampleThin(eventType, kind.account, now)
		return payload, id, "v1." + eventType, nil
	case strings.HasPrefix(eventType, "v1."):
		return nil, "", "", fmt.Errorf("%s is a thin event's type: add -thin, or give %s", eventType, strings.TrimPrefix(eventType, "v1."))
	}
	payload, id, err = stripeevent.SampleIn(eventType, "hookd send-test-event", kind.account, now)
	return payload, id, eventType, err
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
