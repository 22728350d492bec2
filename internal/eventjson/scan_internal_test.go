package eventjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// scanCases are bodies where a JSON reader can go wrong: nesting,
// strings that look like structure, escapes, numbers, and text that is
// almost JSON.
var scanCases = []string{
	`{"id":"evt_1","type":"invoice.paid"}`,
	` { "type" : "invoice.paid" , "id" : "evt_2" } `,
	"{\n\t\"id\":\"evt_3\",\r\n\"type\":\"x\"}",
	`{"data":{"object":{"id":"in_1","type":"nested"}},"id":"evt_4","type":"outer"}`,
	`{"data":[{"id":"no"},"]}{\"",["}"]],"id":"evt_5","type":"arrays"}`,
	`{"note":"a \"quoted\" id: \"id\":\"x\"","id":"evt_6","type":"escapes"}`,
	`{"id":"evt_7","type":"first","type":"last"}`,
	`{"\u0069d":"evt_8","typ\u0065":"escaped names"}`,
	`{"id":"evt_\u00e9\n","type":"escaped value"}`,
	`{"n":-1.5e3,"t":true,"f":false,"z":null,"id":"evt_9","type":"scalars"}`,
	`{"n":[0,-0,1e5,1E+5,2.5e-3,-12.34,100],"id":"evt_10","type":"numbers"}`,
	`{"id":12,"type":"x"}`,
	`{"id":null,"type":"x"}`,
	`{"id":"evt_11"}`,
	`{"ID":"evt_12","Type":"case"}`,
	`{"esc":"\b\f\n\r\t\/\\\"\u00FF","id":"evt_13","type":"all escapes"}`,
	`{}`, `[]`, `[{"id":"evt_14","type":"in an array"}]`, `"id"`, `12`, `null`, ``, ` `,
	// Almost JSON.
	`{"id":"evt_1","type":"x"`, `{"id":"evt_1","type":"x"}}`, `{"id":"evt_1",}`, `{,}`, `[1,]`, `[,1]`,
	`{"id" "x"}`, `{"id":}`, `{id:"x"}`, `{'id':'x'}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`,
	`{"a":+1}`, `{"a":-}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":"\u12G4"}`, "{\"a\":\"tab\tinside\"}", "{\"a\":\"nul\x00\"}", `{"a":"unterminated}`,
	`{"a":1}x`, `{"a":1} {"b":2}`, "\xef\xbb\xbf{}", `{"a":[1,2}`, `{"a":{"b":1]}`, `{"a" : [ ] , "b" : { } }`,
	strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth),
	strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	`{"a":` + strings.Repeat(`{"a":`, maxJSONDepth-1) + `1` + strings.Repeat("}", maxJSONDepth),
}

// Scan agrees with encoding/json on every body: valid exactly when
// json.Valid says so, and with the id and type a decode into a map finds
// (exact names, the last of a repeated one).
func TestScanAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range scanCases {
		checkScan(t, []byte(body))
	}
}

func FuzzScan(f *testing.F) {
	for _, body := range scanCases {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkScan(t, body) })
}

func checkScan(t *testing.T, body []byte) {
	t.Helper()
	id, typ, isObject, valid := Scan(body)
	if want := json.Valid(body); valid != want {
		t.Fatalf("%.200q: valid %v, json.Valid says %v", body, valid, want)
	}
	if !valid {
		return
	}
	if want := bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")); isObject != want {
		t.Fatalf("%.200q: object %v, want %v", body, isObject, want)
	}
	if !isObject {
		return
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		t.Fatalf("%.200q: valid, yet Unmarshal fails: %v", body, err)
	}
	if string(id) != string(members["id"]) || string(typ) != string(members["type"]) {
		t.Fatalf("%.200q: id %s, type %s; Unmarshal finds %s, %s", body, id, typ, members["id"], members["type"])
	}
}
