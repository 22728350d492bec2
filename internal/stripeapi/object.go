package stripeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/hookd/hookd/internal/stripeevent"
)

// ErrNoObjectPath means hookd does not know where Stripe's API serves an
// object of that type, so it cannot fetch it.
var ErrNoObjectPath = errors.New("no known API path for this object type")

// ObjectRef names an object to fetch: by its API URL, as a thin event's
// related_object.url gives it, or by its type and id, as a snapshot
// event's data.object has them.
type ObjectRef struct {
	// URL is the object's path, /v1/... or /v2/...; it wins over Type and
	// ID when set.
	URL string
	// Type is the object's type ("invoice", "checkout.session") and ID its
	// id.
	Type, ID string
	// Account is the connected account it lives in, sent as
	// Stripe-Account; empty for the account's own.
	Account string
}

// Path is where Stripe's API serves the object.
func (r ObjectRef) Path() (string, error) {
	if r.URL != "" {
		if (!strings.HasPrefix(r.URL, "/v1/") && !strings.HasPrefix(r.URL, "/v2/")) || strings.Contains(r.URL, "..") ||
			strings.ContainsAny(r.URL, "?#") {
			return "", fmt.Errorf("%q is not an API object's path", r.URL)
		}
		return r.URL, nil
	}
	prefix, ok := stripeevent.ObjectPaths[r.Type]
	if !ok || r.ID == "" || strings.ContainsAny(r.ID, "/?#") {
		return "", fmt.Errorf("%w: %q", ErrNoObjectPath, r.Type)
	}
	return prefix + r.ID, nil
}

// rawObject keeps an object as the bytes the API sent.
type rawObject struct {
	stripe.APIResource
}

// Object reads the object ref names, as it is now in Stripe, and returns
// the JSON the API sent.
func (c *Client) Object(ctx context.Context, ref ObjectRef) ([]byte, error) {
	path, err := ref.Path()
	if err != nil {
		return nil, &APIError{Message: "fetch the object from Stripe: " + err.Error(), err: err}
	}
	what := path
	if strings.HasPrefix(path, "/v2/") {
		var raw json.RawMessage
		err := c.call(ctx, func() error { return c.getV2(ctx, path, ref.Account, &raw) })
		if err != nil {
			return nil, describe(err, what, "", "the object's resource")
		}
		return raw, nil
	}
	params := &stripe.Params{Context: ctx}
	if ref.Account != "" {
		params.SetStripeAccount(ref.Account)
	}
	var obj rawObject
	err = c.call(ctx, func() error {
		obj = rawObject{}
		return c.backend.CallRaw(http.MethodGet, path, c.key, nil, params, &obj)
	})
	if err != nil {
		return nil, describe(err, what, "", "the object's resource")
	}
	if obj.LastResponse == nil {
		return nil, &APIError{Message: fmt.Sprintf("read %s: no response body", path)}
	}
	return slices.Clone(obj.LastResponse.RawJSON), nil
}

// EventObject reads which object an event is about from its payload: a
// thin event's related_object (fetched by its url, in the event's
// context), or a snapshot event's data.object (by its object type and id,
// in the event's account), whose JSON is then the snapshot. ok is false
// when the event names no object hookd can fetch.
func EventObject(payload []byte) (ref ObjectRef, snapshot json.RawMessage, ok bool) {
	var e struct {
		Object        string `json:"object"`
		Account       string `json:"account"`
		Context       string `json:"context"`
		RelatedObject *struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"related_object"`
		Data *struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(payload, &e) != nil {
		return ObjectRef{}, nil, false
	}
	if ro := e.RelatedObject; ro != nil {
		ref = ObjectRef{URL: ro.URL, Type: ro.Type, ID: ro.ID, Account: e.Context}
		_, err := ref.Path()
		return ref, nil, err == nil
	}
	if e.Data == nil || len(e.Data.Object) == 0 {
		return ObjectRef{}, nil, false
	}
	var o struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	}
	if json.Unmarshal(e.Data.Object, &o) != nil {
		return ObjectRef{}, nil, false
	}
	ref = ObjectRef{Type: o.Object, ID: o.ID, Account: e.Account}
	_, err := ref.Path()
	return ref, e.Data.Object, err == nil
}

// String names the object for a person: "invoice in_..." or its URL.
func (r ObjectRef) String() string {
	if r.Type != "" && r.ID != "" {
		return r.Type + " " + r.ID
	}
	return r.URL
}
