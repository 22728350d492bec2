package stripeapi

import (
	"net/http"

	"golang.org/x/time/rate"
)

// DefaultRate is the reads per second a hookd process makes to Stripe's
// API at most, over reconciliation, the dashboard and doctor together: well
// below Stripe's own limit (100 per second in live mode, 25 in test mode),
// so the app that shares the account's limit keeps most of it.
const DefaultRate = 20

// Budget is the one rate of requests to Stripe's API that every Client of
// a process shares: a token bucket refilled at its rate, holding one token,
// so requests never come closer together than 1/rate, whoever makes them.
// Every HTTP request counts, stripe-go's own retries and the retries after
// a 429 included.
type Budget struct {
	limiter *rate.Limiter
}

// NewBudget returns a budget of perSecond requests a second; zero or less
// means DefaultRate.
func NewBudget(perSecond float64) *Budget {
	if perSecond <= 0 {
		perSecond = DefaultRate
	}
	return &Budget{limiter: rate.NewLimiter(rate.Limit(perSecond), 1)}
}

// Rate is the budget's requests per second.
func (b *Budget) Rate() float64 { return float64(b.limiter.Limit()) }

// budgetTransport waits for the budget before each request.
type budgetTransport struct {
	budget *Budget
	next   http.RoundTripper
}

func (t budgetTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.budget.limiter.Wait(r.Context()); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// withBudget returns a copy of hc whose requests wait for b.
func withBudget(hc *http.Client, b *Budget) *http.Client {
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out := *hc
	out.Transport = budgetTransport{budget: b, next: next}
	return &out
}
