// Package eventjson reads the fields of a Stripe event hookd needs (its id
// and type, and what the receiver keeps of every event: Fields) from the
// exact bytes Stripe sent, and holds the one rule for what a valid event id
// is. The receiver reads a delivery's body with ScanEvent, the rejection
// log a refused body's claim with ClaimedID, and the dashboard's search and
// single-event pull hold what people type to CheckID.
//
// Its guarantee: ScanEvent agrees with encoding/json on what is valid JSON
// and on which members it finds, and an id passes CheckID exactly when the
// receiver would accept it.
package eventjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"time"
)

// maxJSONDepth is how deeply arrays and objects may nest, encoding/json's
// own bound.
const maxJSONDepth = 10000

// Fields are the members of a Stripe event the receiver reads, each the
// raw JSON value as the body holds it (nil when absent), sliced from the
// body without a copy: a snapshot event ("object": "event") carries its
// object in data.object, a thin one ("object": "v2.core.event") names it in
// related_object.
type Fields struct {
	ID, Type json.RawMessage
	// Object is "event" or "v2.core.event".
	Object   json.RawMessage
	Livemode json.RawMessage
	// Account is a Connect event's connected account; Context is a thin
	// event's, where it has one.
	Account, Context json.RawMessage
	APIVersion       json.RawMessage
	// Created is a number (seconds) in a snapshot event, an ISO-8601
	// string in a thin one.
	Created json.RawMessage
	// SnapshotEvent names, in a thin v1.* event, the snapshot event it
	// mirrors.
	SnapshotEvent json.RawMessage
	// Reason is what caused a thin event (a request, an automation).
	Reason json.RawMessage
	// RelatedID and RelatedType are related_object.id and .type.
	RelatedID, RelatedType json.RawMessage
	// DataObjectID, DataObjectType and DataObjectCustomer are
	// data.object.id, .object and .customer.
	DataObjectID, DataObjectType, DataObjectCustomer json.RawMessage
}

// Scan reads a webhook body once: it reports whether the body is one
// valid JSON value, as json.Valid would, and whether that value is an
// object, and returns the raw values of the object's "id" and "type"
// members. As with json.Unmarshal, a member given twice counts as its last;
// unlike it, names match exactly, as Stripe writes them.
func Scan(data []byte) (id, typ json.RawMessage, isObject, valid bool) {
	var f Fields
	isObject, valid = ScanEvent(data, &f)
	return f.ID, f.Type, isObject, valid
}

// ScanEvent is Scan, setting every member of f (which it takes rather
// than returns, so that the caller's copy is the only one): the ones of the
// top-level object and of its data.object and related_object, read in the
// same pass. An object given twice counts as its last, as json.Unmarshal
// into maps would have it.
//
// It is on every delivery's path. json.Valid followed by a second pass for
// the two members took about 7 µs for a 1.5 KB event, several times the
// signature check; one pass with no state machine per byte is a fraction.
// The members it keeps are slices of data, so an absent one costs nothing.
func ScanEvent(data []byte, f *Fields) (isObject, valid bool) {
	s := jsonScanner{data: data}
	s.space()
	isObject = s.i < len(data) && data[s.i] == '{'
	valid = s.value(placeTop)
	s.space()
	valid = valid && s.i == len(data)
	// Kept in the scanner while it runs, and copied out once: a scanner
	// holding f itself would make f, and whatever holds it, escape to the
	// heap on every delivery.
	*f = s.f
	return isObject, valid
}

// place is which object of the event the scanner is in: the ones whose
// members it keeps, or elsewhere.
type place uint8

const (
	elsewhere place = iota
	placeTop
	placeData
	placeDataObject
	placeRelated
)

// jsonScanner checks JSON text from data[i] on, keeping the members of
// Fields as it passes them.
type jsonScanner struct {
	data  []byte
	i     int
	depth int
	f     Fields
}

// value passes the value at data[i], which is at place enter when it is an
// object.
func (s *jsonScanner) value(enter place) bool {
	s.space()
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(enter)
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

func (s *jsonScanner) object(here place) bool {
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
		if here == elsewhere {
			return s.value(elsewhere)
		}
		field, enter := s.slot(here, name)
		valueStart := s.i
		if !s.value(enter) {
			return false
		}
		if field != nil {
			*field = s.data[valueStart:s.i]
		}
		return true
	})
}

// slot is where the value of member name (still quoted) of an object at
// here goes: the member of Fields it is, or the place of the object it is.
// Entering an object, it forgets what an earlier member of that name
// left: the last one counts. One switch per member, on the path of every
// delivery.
func (s *jsonScanner) slot(here place, name []byte) (*json.RawMessage, place) {
	if bytes.IndexByte(name, '\\') >= 0 {
		name = unquotedName(name)
	}
	f := &s.f
	switch here {
	case placeTop:
		switch string(name) {
		case `"id"`:
			return &f.ID, elsewhere
		case `"type"`:
			return &f.Type, elsewhere
		case `"object"`:
			return &f.Object, elsewhere
		case `"livemode"`:
			return &f.Livemode, elsewhere
		case `"account"`:
			return &f.Account, elsewhere
		case `"context"`:
			return &f.Context, elsewhere
		case `"api_version"`:
			return &f.APIVersion, elsewhere
		case `"created"`:
			return &f.Created, elsewhere
		case `"snapshot_event"`:
			return &f.SnapshotEvent, elsewhere
		case `"reason"`:
			return &f.Reason, elsewhere
		case `"data"`:
			f.DataObjectID, f.DataObjectType, f.DataObjectCustomer = nil, nil, nil
			return nil, placeData
		case `"related_object"`:
			f.RelatedID, f.RelatedType = nil, nil
			return nil, placeRelated
		}
	case placeData:
		if string(name) == `"object"` {
			f.DataObjectID, f.DataObjectType, f.DataObjectCustomer = nil, nil, nil
			return nil, placeDataObject
		}
	case placeDataObject:
		switch string(name) {
		case `"id"`:
			return &f.DataObjectID, elsewhere
		case `"object"`:
			return &f.DataObjectType, elsewhere
		case `"customer"`:
			return &f.DataObjectCustomer, elsewhere
		}
	case placeRelated:
		switch string(name) {
		case `"id"`:
			return &f.RelatedID, elsewhere
		case `"type"`:
			return &f.RelatedType, elsewhere
		}
	}
	return nil, elsewhere
}

// unquotedName is a member's name, still quoted, with its escapes undone,
// so that names match as json.Unmarshal matches them.
func unquotedName(name []byte) []byte {
	var unquoted string
	if json.Unmarshal(name, &unquoted) == nil {
		return []byte(`"` + unquoted + `"`)
	}
	return name
}

func (s *jsonScanner) array() bool {
	return s.container(']', s.element)
}

// element passes an array's element: no place of Fields is in an array.
func (s *jsonScanner) element() bool { return s.value(elsewhere) }

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

// CreatedTime is Stripe's created of the scanned event: seconds in a
// snapshot event, an RFC 3339 time in a thin one; nil when absent or
// neither.
func (f *Fields) CreatedTime() *time.Time {
	raw := f.Created
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		s, ok := String(raw)
		if !ok {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil
		}
		return &t
	}
	secs, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil
	}
	t := time.Unix(secs, 0).UTC()
	return &t
}
