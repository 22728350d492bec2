package eventjson_test

import (
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/eventjson"
)

func TestCheckID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"evt_1QcWq2LkdIwHu7ixM3gRXyZb":          true,
		"evt_\u00e9":                            true,
		strings.Repeat("x", eventjson.MaxIDLen): true,
		"":                                      false,
		strings.Repeat("x", eventjson.MaxIDLen+1): false,
		// Within 255 characters, beyond 255 bytes.
		strings.Repeat("\u00e9", 200): false,
		"evt_\x00":                    false,
		"evt_\n":                      false,
	} {
		if err := eventjson.CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%.40q): %v, want ok %v", id, err, ok)
		}
	}
}

// A refused body's claim is held to the same rule, and to UTF-8: bytes
// that are not claim no event.
func TestClaimedID(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"id":"evt_1","type":"x"}`:                         "evt_1",
		`{"data":{"id":"in_1"},"id":"evt_2"}`:               "evt_2",
		`{"id":""}`:                                         "",
		`{"id":12}`:                                         "",
		`[{"id":"evt_3"}]`:                                  "",
		"{\"id\":\"evt_\xff\"}":                             "",
		`{"id":"` + strings.Repeat("x", 256) + `"}`:         "",
		`{"id":"evt_4"` + strings.Repeat(" ", 20<<10) + `}`: "evt_4",
	} {
		got := ""
		if id := eventjson.ClaimedID([]byte(body)); id != nil {
			got = *id
		}
		if got != want {
			t.Errorf("ClaimedID(%.40q) = %q, want %q", body, got, want)
		}
	}
}
