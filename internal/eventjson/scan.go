// Package eventjson reads the two fields of a Stripe event hookd needs,
// its id and type, from the exact bytes Stripe sent, and holds the one rule
// for what a valid event id is. The receiver reads a delivery's body with
// Scan, the rejection log a refused body's claim with ClaimedID, and the
// dashboard's search and single-event pull hold what people type to
// CheckID.
//
// Its guarantee: Scan agrees with encoding/json on what is valid JSON and
// on which members it finds, and an id passes CheckID exactly when the
// receiver would accept it.
package eventjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// maxJSONDepth is how deeply arrays and objects may nest, encoding/json's
// own bound.
const maxJSONDepth = 10000

// Scan reads a webhook body once: it reports whether the body is one
// valid JSON value, as json.Valid would, and whether that value is an
// object, and returns the raw values of the object's "id" and "type"
// members. As with json.Unmarshal, a member given twice counts as its last;
// unlike it, names match exactly, as Stripe writes them.
//
// It is on every delivery's path. json.Valid followed by a second pass for
// the two members took about 7 µs for a 1.5 KB event, several times the
// signature check; one pass with no state machine per byte is a fraction.
func Scan(data []byte) (id, typ json.RawMessage, isObject, valid bool) {
	s := jsonScanner{data: data}
	s.space()
	isObject = s.i < len(data) && data[s.i] == '{'
	valid = s.value()
	s.space()
	valid = valid && s.i == len(data)
	return s.id, s.typ, isObject, valid
}

// jsonScanner checks JSON text from data[i] on, keeping the top-level
// object's id and type as it passes them.
type jsonScanner struct {
	data    []byte
	i       int
	depth   int
	id, typ []byte
}

func (s *jsonScanner) value() bool {
	s.space()
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		return s.string()
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *jsonScanner) object() bool {
	top := s.depth == 0
	return s.container('}', func() bool {
		nameStart := s.i
		if s.i >= len(s.data) || s.data[s.i] != '"' || !s.string() {
			return false
		}
		name := s.data[nameStart:s.i]
		s.space()
		if !s.next(':') {
			return false
		}
		s.space()
		valueStart := s.i
		if !s.value() {
			return false
		}
		if top {
			s.member(name, s.data[valueStart:s.i])
		}
		return true
	})
}

// member keeps value when name, still quoted, is "id" or "type".
func (s *jsonScanner) member(name, value []byte) {
	if bytes.IndexByte(name, '\\') >= 0 {
		var unquoted string
		if json.Unmarshal(name, &unquoted) == nil {
			name = []byte(`"` + unquoted + `"`)
		}
	}
	switch string(name) {
	case `"id"`:
		s.id = value
	case `"type"`:
		s.typ = value
	}
}

func (s *jsonScanner) array() bool {
	return s.container(']', s.value)
}

// container passes an object or an array from its opening bracket to the
// closing one, with element passing each member or element.
func (s *jsonScanner) container(closing byte, element func() bool) bool {
	if s.depth++; s.depth > maxJSONDepth {
		return false
	}
	s.i++ // { or [
	s.space()
	if !s.next(closing) {
		for {
			s.space()
			if !element() {
				return false
			}
			s.space()
			if s.next(closing) {
				break
			}
			if !s.next(',') {
				return false
			}
		}
	}
	s.depth--
	return true
}

// string passes the string that starts at data[i]: no control characters,
// and only JSON's escapes. Like json.Valid, it leaves UTF-8 to the caller.
func (s *jsonScanner) string() bool {
	data, i := s.data, s.i+1 // past the "
	for i < len(data) {
		i += plainText(data[i:])
		if i >= len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c < 0x20 || i+1 >= len(data):
			return false
		}
		switch data[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(data) {
				return false
			}
			for _, h := range data[i+2 : i+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return false
				}
			}
			i += 6
		default:
			return false
		}
	}
	return false
}

// plainText returns the length of the text data starts with that a JSON
// string holds as it is: no quote, backslash or control character. It tests
// eight bytes at a time (as utf8.Valid does for ASCII), since an event is
// mostly strings.
func plainText(data []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := 0
	for ; n+8 <= len(data); n += 8 {
		x := binary.LittleEndian.Uint64(data[n:])
		quote, backslash := x^(ones*'"'), x^(ones*'\\')
		// The high bit of a byte is set where it is below 0x20, or where
		// it is zero after the xor: a quote or a backslash. (A borrow may
		// mark the bytes after a marked one too; those are looked at one
		// by one below.)
		if ((x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			break
		}
	}
	for n < len(data) && data[n] >= 0x20 && data[n] != '"' && data[n] != '\\' {
		n++
	}
	return n
}

func (s *jsonScanner) number() bool {
	s.next('-')
	switch {
	case s.next('0'):
	case s.i < len(s.data) && '1' <= s.data[s.i] && s.data[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.next('.') && !s.digits() {
		return false
	}
	if s.next('e') || s.next('E') {
		if !s.next('+') {
			s.next('-')
		}
		return s.digits()
	}
	return true
}

// digits passes one or more decimal digits.
func (s *jsonScanner) digits() bool {
	start := s.i
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *jsonScanner) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// next passes c if it comes next.
func (s *jsonScanner) next(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
