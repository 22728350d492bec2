package eventjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen bounds an event id, in bytes, and an event type, which is held
// to the same rule. Stripe's are a few dozen characters; the bound keeps an
// absurd one from failing the index insert (a b-tree entry must fit a third
// of a page), which would answer 503 and have Stripe redeliver it forever.
const MaxIDLen = 255

var (
	errIDLength      = fmt.Errorf("must have 1 to %d characters", MaxIDLen)
	errIDUnprintable = errors.New("has unprintable characters")
)

// CheckID is the one rule for what a valid event id is: 1 to MaxIDLen bytes
// of printable characters. The receiver refuses an event whose id or type
// breaks it, so no id that breaks it is ever stored, and a search or a pull
// for one can find nothing. The error says which part of the rule s breaks,
// to be read after the field's name.
func CheckID(s string) error {
	if s == "" || len(s) > MaxIDLen {
		return errIDLength
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return errIDUnprintable
		}
	}
	return nil
}

// String returns the text of raw, a JSON value Scan found, when it is a
// string; false for any other value.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		// A string without escapes, as Stripe's ids and types are: the
		// scan has checked it, and its text is between the quotes.
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// claimScanBytes is how much of a body ClaimedID reads for the event id it
// claims. Stripe puts "id" first; a body that hides it deeper is not worth
// parsing a megabyte for.
const claimScanBytes = 16 << 10

// ClaimedID returns the top-level "id" a refused body claims, read with a
// streaming decoder from its first claimScanBytes so a large body is not
// parsed whole; nil when there is none, or none that passes CheckID.
func ClaimedID(payload []byte) *string {
	dec := json.NewDecoder(bytes.NewReader(payload[:min(len(payload), claimScanBytes)]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "id" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		var id string
		if dec.Decode(&id) != nil || CheckID(id) != nil {
			return nil
		}
		// A refused body need not be UTF-8, and the decoder reads the bytes
		// that are not as U+FFFD: such an id is no claim to any event.
		if strings.ContainsRune(id, utf8.RuneError) {
			return nil
		}
		return &id
	}
	return nil
}
