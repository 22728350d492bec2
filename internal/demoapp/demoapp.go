// Package demoapp is the app hookd forwards to in `make run`'s demo, standing
// for the user's own app. It fails the way real apps fail (a crashed
// framework's 500, no answer in time, a 422 until the event is dead), so the
// dashboard has something to show. What it does depends only on the event's
// id, type and how often it has seen it (Decide), so every demo tells the same
// story; it is not a place to send production traffic.
package demoapp

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/forwardsig"
)

// Outcome is what the demo app does with one delivery.
type Outcome int

const (
	// Accept answers 200.
	Accept Outcome = iota
	// Crash answers 500 with the error a Node.js (Fastify) app sends when
	// its Redis is down.
	Crash
	// Hang answers nothing until hookd gives up (HOOKD_FORWARD_TIMEOUT).
	Hang
	// Reject answers 422: the app does not know the subscription's new
	// price.
	Reject
)

func (o Outcome) String() string {
	return [...]string{"accept", "crash", "hang", "reject"}[o]
}

const (
	// RejectedType is the event type the app rejects with a 422.
	RejectedType = "customer.subscription.updated"
	// RejectedDeliveries is how many deliveries of a RejectedType event
	// the app rejects: the inline attempt and hookd's five retries, so the
	// event goes dead; the next delivery, a person's Retry, is taken, as
	// if a fix had been deployed meanwhile.
	RejectedDeliveries = 6
	// CrashedDeliveries is how many deliveries of a crashing event the app
	// answers with a 500: the inline attempt and four retries, as if its
	// Redis were down for the half minute they take under the demo
	// backoff. The fifth retry is taken: such an event stays on Pending,
	// showing its error, as long as the rejected ones, then goes through
	// at the moment they go dead.
	CrashedDeliveries = 5
	// crashPercent and hangPercent are the shares of other events that
	// crash and that hang on their first delivery.
	crashPercent = 16
	hangPercent  = 10
)

// Decide returns what the app does with the delivery-th delivery (1 for
// the first) of an event. hookd's own hookd.ping, sent by `hookd doctor`,
// is always accepted.
func Decide(eventID, eventType string, delivery int) Outcome {
	if eventType == "hookd.ping" {
		return Accept
	}
	if eventType == RejectedType {
		if delivery <= RejectedDeliveries {
			return Reject
		}
		return Accept
	}
	h := fnv.New32a()
	h.Write([]byte(eventID))
	switch bucket := h.Sum32() % 100; {
	case bucket < crashPercent && delivery <= CrashedDeliveries:
		return Crash
	case bucket >= crashPercent && bucket < crashPercent+hangPercent && delivery == 1:
		return Hang
	}
	return Accept
}

// App is the demo app's HTTP handler: POST events to any path; GET / says
// what it has seen.
type App struct {
	key    []byte // decoded HOOKD_FORWARD_SECRET; nil: unsigned deliveries are fine
	logger *slog.Logger
	// maxHang bounds a Hang for a client that never gives up.
	maxHang time.Duration

	mu       sync.Mutex
	seen     map[string]int // event id -> deliveries so far
	outcomes map[Outcome]int
}

// New returns the demo app. With forwardSecret (whsec_<base64>, hookd's
// HOOKD_FORWARD_SECRET) it verifies the Standard Webhooks signature of
// every delivery, as a real app should, and answers 401 to a bad one.
func New(forwardSecret string, logger *slog.Logger) (*App, error) {
	a := &App{logger: logger, maxHang: 2 * time.Minute, seen: map[string]int{}, outcomes: map[Outcome]int{}}
	key, err := forwardsig.ParseSecret(forwardSecret)
	if err != nil {
		return nil, err
	}
	a.key = key
	return a, nil
}

func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		a.serveStatus(w)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST events here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if a.key != nil && !a.verify(r.Header, body) {
		a.logger.Warn("refused a delivery with a bad signature", "event_id", r.Header.Get("Hookd-Event-Id"))
		http.Error(w, "webhook-signature does not match HOOKD_FORWARD_SECRET", http.StatusUnauthorized)
		return
	}
	id, eventType := r.Header.Get("Hookd-Event-Id"), r.Header.Get("Hookd-Event-Type")
	if id == "" {
		http.Error(w, "no Hookd-Event-Id header", http.StatusBadRequest)
		return
	}

	a.mu.Lock()
	a.seen[id]++
	delivery := a.seen[id]
	outcome := Decide(id, eventType, delivery)
	a.outcomes[outcome]++
	a.mu.Unlock()
	a.logger.Info("delivery", "event_id", id, "event_type", eventType, "delivery", delivery,
		"hookd_attempt", r.Header.Get("Hookd-Attempt"), "outcome", outcome.String())

	switch outcome {
	case Crash:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, fastifyError)
	case Hang:
		// Waits until hookd gives up and closes the connection.
		select {
		case <-r.Context().Done():
		case <-time.After(a.maxHang):
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	case Reject:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, rejection(body))
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"received":true}`)
	}
}

// fastifyError is what Fastify's default error handler sends when a route
// throws: here, the app's Redis is down.
const fastifyError = `{"statusCode":500,"code":"ECONNREFUSED","error":"Internal Server Error",` +
	`"message":"connect ECONNREFUSED 127.0.0.1:6379"}`

// rejection is the 422 body: a validation error naming the subscription
// and the price the app does not know.
func rejection(body []byte) string {
	var event struct {
		Data struct {
			Object struct {
				ID    string `json:"id"`
				Items struct {
					Data []struct {
						Price struct {
							ID string `json:"id"`
						} `json:"price"`
					} `json:"data"`
				} `json:"items"`
			} `json:"object"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &event)
	sub, price := event.Data.Object.ID, "its new price"
	if items := event.Data.Object.Items.Data; len(items) > 0 && items[0].Price.ID != "" {
		price = items[0].Price.ID
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{
		"type":    "validation_error",
		"message": fmt.Sprintf("Unknown price %s: not in PLANS, so subscription %s was not updated", price, sub),
	}})
	return string(b)
}

// verify checks the Standard Webhooks signature hookd sends with
// HOOKD_FORWARD_SECRET: base64 HMAC-SHA256 of "id.timestamp.body", within
// five minutes of now.
func (a *App) verify(h http.Header, body []byte) bool {
	return forwardsig.Verify(h, a.key, body, time.Now(), 5*time.Minute)
}

func (a *App) serveStatus(w http.ResponseWriter) {
	a.mu.Lock()
	events, counts := len(a.seen), map[Outcome]int{}
	for o, n := range a.outcomes {
		counts[o] = n
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "hookd demo app: %d events seen; deliveries accepted %d, crashed %d, hung %d, rejected %d\n",
		events, counts[Accept], counts[Crash], counts[Hang], counts[Reject])
}
