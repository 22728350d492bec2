package receiver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// FuzzReceive feeds Receive arbitrary bodies and signature headers. Bodies
// are sent both as they come, with the fuzzed header, and correctly signed,
// so the fuzzer reaches the JSON checks too. Whatever comes in, Receive must
// not panic, must refuse bad input as such (a 400, never a 5xx), and must
// store nothing for what it refuses.
func FuzzReceive(f *testing.F) {
	store, bundle := setup(f)
	p := &countingProcessor{}
	p.fail.Store(true) // queue accepted events, so payloads reach the database
	r := newReceiver(store, p)

	for _, seed := range []struct{ body, header string }{
		{`{"id":"evt_seed_1","object":"event","type":"invoice.paid"}`, ""},
		{`{"id":"evt_seed_2","type":"charge.refunded"}`, "t=1,v1=00"},
		{`{"id":12,"type":"x"}`, "garbage"},
		{`{"id":"evt_\u0000","type":"x"}`, ""},
		{`{"id":"evt_seed_3","type":"x","note":"\ud800"}`, ""},
		{"{\"id\":\"evt_\xff\",\"type\":\"x\"}", ""},
		{`[]`, ""},
		{`null`, "t=" + time.Now().Format("20060102") + ",v1=zz"},
		{``, ""},
		{`{"id":"evt_seed_4","type":"x"`, ""},
	} {
		f.Add([]byte(seed.body), seed.header)
	}

	f.Fuzz(func(t *testing.T, body []byte, header string) {
		before := queuetest.Markers(t, bundle.pool) + bundle.queued(t)
		check := func(what string, err error) {
			t.Helper()
			switch {
			case err == nil:
			case errors.Is(err, receiver.ErrBadSignature), errors.Is(err, receiver.ErrBadPayload):
				if after := queuetest.Markers(t, bundle.pool) + bundle.queued(t); after != before {
					t.Errorf("%s: refused with %v but stored %d rows", what, err, after-before)
				}
			default:
				t.Errorf("%s: got %v, want success or a refusal (never a 5xx for bad input)", what, err)
			}
		}
		_, err := r.Receive(t.Context(), body, header)
		check("fuzzed header", err)
		before = queuetest.Markers(t, bundle.pool) + bundle.queued(t)
		_, err = r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
		check("signed", err)
	})
}
