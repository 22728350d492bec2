package destinations_test

import (
	"fmt"
	"testing"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/worker"
)

// TestParse_TheForwarderTakesWhatParseTakes: a header headers_env may set
// is one the worker's forwarder takes, and one it refuses the forwarder
// refuses too, so that a file hookd destinations check passes never fails
// when its forwarders are made; SPEC's example, secrets and all, makes its
// forwarders.
func TestParse_TheForwarderTakesWhatParseTakes(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Authorization", "X-Api-Key", "User-Agent", "Accept", "Content-Encoding",
		"Content-Type", "content-type", "Webhook-Id", "webhook-signature", "Webhook-Other", "Hookd-Destination", "hookd-x",
		"Traceparent", "tracestate", "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection"} {
		file := fmt.Sprintf("destinations:\n  - name: a\n    url: https://x\n    headers_env: {%q: V}\n", name)
		set, parseErr := destinations.Parse([]byte(file), env(map[string]string{"V": "v"}))
		var fwdErr error
		if parseErr == nil {
			d := set.Destinations[0]
			_, fwdErr = worker.NewDestinationForwarder(worker.ForwardOptions{Name: d.Name, URL: d.URL, Headers: d.Headers})
		} else {
			_, fwdErr = worker.NewDestinationForwarder(worker.ForwardOptions{Name: "a", URL: "https://x",
				Headers: map[string][]string{name: {"v"}}})
		}
		if (parseErr == nil) != (fwdErr == nil) {
			t.Errorf("header %s: Parse says %v, the forwarder %v", name, parseErr, fwdErr)
		}
	}
	set, err := destinations.Parse([]byte(specExample), specEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range set.Destinations {
		if _, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: d.Name, URL: d.URL,
			Secrets: d.SigningSecrets, Headers: d.Headers}); err != nil {
			t.Errorf("%s: %v", d.Name, err)
		}
	}
}
