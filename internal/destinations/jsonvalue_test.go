package destinations

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// jsonCases are valid and invalid JSON, the edges of each part of the
// grammar.
var jsonCases = []string{
	`{}`, `[]`, `{"a":1}`, ` { "a" : [ 1 , 2.5 , -3e2 , 0 , -0 , 1E+2, 1e-2 ] } `, `"plain"`, `true`, `false`, `null`,
	`{"a":{"b":{"c":[{"d":null}]}}}`, `{"a":1,"a":2}`, `{"esc":"a\"b\\c\/d\n\u00e9\ud83d\ude00"}`, `{"utf8":"café ☕"}`,
	`{"bad utf8":"` + "\xff" + `"}`, `{"lone surrogate":"\ud800"}`, `123456789012345678901234567890`, `1e308`,
	`{"a":1}x`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1,]`, `[1 2]`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `1e400`,
	`-1e400`, `tru`, `nul`, `truex`, `"unterminated`, "\"ctl\x01\"", `"\x"`, `{"a":}`, `[`, `{`, ``, `   `,
	`{"a":[1,{"b":"c"}],"d":{"e":false}}`, `"\"`, `"\\"`, `{"k\"ey":1}`, `Infinity`, `NaN`, `0x10`,
}

// TestDecodeJSON_AsEncodingJSON: decodeJSON gives what json.Unmarshal
// into an any gives, and refuses what it refuses.
func TestDecodeJSON_AsEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := append(jsonCases, strings.Repeat("[", 10001)+strings.Repeat("]", 10001), strings.Repeat("[", 10000)+strings.Repeat("]", 10000))
	for _, c := range cases {
		checkAsEncodingJSON(t, []byte(c))
	}
}

func checkAsEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	var want any
	wantErr := json.Unmarshal(data, &want)
	got, err := decodeJSON(data)
	if (err != nil) != (wantErr != nil) {
		t.Errorf("%.80q: error %v, encoding/json's %v", data, err, wantErr)
		return
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%.80q: %#v, encoding/json's %#v", data, got, want)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkAsEncodingJSON)
}
