package destinations

import (
	"encoding/json"
	"errors"
	"strconv"
)

// errJSON is a payload that is not JSON.
var errJSON = errors.New("not JSON")

// maxJSONDepth bounds the nesting a payload may have, as encoding/json's.
const maxJSONDepth = 10000

// decodeJSON decodes data as json.Unmarshal into an any does (objects as
// map[string]any, arrays as []any, numbers as float64). It is the cost of
// a filter that grows with the event, and without reflection Route on a
// 1.5 KB event takes half the time it took through json.Unmarshal
// (BenchmarkRoute). A string holding an escape or a byte above ASCII is
// handed to encoding/json, so that every string decodes as it would there;
// FuzzDecodeJSON holds the two to the same values and the same refusals.
func decodeJSON(data []byte) (any, error) {
	d := jsonDecoder{data: data}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); d.pos != len(d.data) {
		return nil, errJSON
	}
	return v, nil
}

type jsonDecoder struct {
	data []byte
	pos  int
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at pos, depth deep.
func (d *jsonDecoder) value(depth int) (any, error) {
	if depth >= maxJSONDepth {
		return nil, errJSON
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, errJSON
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	for _, lit := range []struct {
		text  string
		value any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(d.data)-d.pos >= len(lit.text) && string(d.data[d.pos:d.pos+len(lit.text)]) == lit.text {
			d.pos += len(lit.text)
			return lit.value, nil
		}
	}
	return nil, errJSON
}

func (d *jsonDecoder) object(depth int) (any, error) {
	d.pos++ // {
	m := map[string]any{}
	if d.skipSpace(); d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		if d.skipSpace(); d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, errJSON
		}
		key, err := d.string()
		if err != nil {
			return nil, err
		}
		if d.skipSpace(); d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, errJSON
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[key] = v
		if done, err := d.next('}'); err != nil || done {
			return m, err
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, error) {
	d.pos++ // [
	a := []any{}
	if d.skipSpace(); d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if done, err := d.next(']'); err != nil || done {
			return a, err
		}
	}
}

// next reads the comma before another member, or end, which closes the
// object or array.
func (d *jsonDecoder) next(end byte) (done bool, err error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, errJSON
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return false, nil
	case end:
		d.pos++
		return true, nil
	}
	return false, errJSON
}

// string decodes the string at pos: plain ASCII at once, anything else
// through encoding/json.
func (d *jsonDecoder) string() (string, error) {
	start := d.pos
	plain := true
	for i := start + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.pos = i + 1
			if plain {
				return string(d.data[start+1 : i]), nil
			}
			var s string
			if err := json.Unmarshal(d.data[start:i+1], &s); err != nil {
				return "", errJSON
			}
			return s, nil
		case c == '\\':
			plain = false
			i++ // the escaped byte is no closing quote
		case c < 0x20:
			return "", errJSON
		case c >= 0x80:
			plain = false
		}
	}
	return "", errJSON
}

// number decodes the number at pos, held to JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case !d.digits():
		return nil, errJSON
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if !d.digits() {
			return nil, errJSON
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !d.digits() {
			return nil, errJSON
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:d.pos]), 64)
	if err != nil {
		return nil, errJSON // out of a float64's range, as encoding/json refuses
	}
	return f, nil
}

// digits reads one or more digits, and says whether there was one.
func (d *jsonDecoder) digits() bool {
	start := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > start
}
