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
	// The members of Fields, in the objects that hold them and elsewhere.
	`{"id":"evt_t","object":"v2.core.event","type":"v1.invoice.paid","created":"2025-11-01T12:00:00.000Z",` +
		`"livemode":false,"context":"acct_1","reason":{"type":"request","request":{"id":"req_1"}},` +
		`"related_object":{"id":"in_1","type":"invoice","url":"/v1/invoices/in_1"},"snapshot_event":"evt_s"}`,
	`{"id":"evt_s","object":"event","account":"acct_2","api_version":"2025-03-31.basil","created":1764547200,` +
		`"data":{"object":{"id":"in_1","object":"invoice","customer":"cus_1","lines":{"data":[{"id":"il_1","object":"line_item","customer":"no"}]}}},` +
		`"livemode":true,"type":"invoice.paid"}`,
	`{"data":{"object":{"id":"cus_9","object":"customer"}},"data":{"object":{"object":"charge"}},"id":"evt_dup","type":"x"}`,
	`{"data":{"object":{"id":"cus_9"},"object":{"customer":null}},"id":"evt_dup2","type":"x"}`,
	`{"data":null,"related_object":[{"id":"x"}],"id":"evt_n","type":"x"}`,
	`{"related_object":{"id":"a","type":"b"},"related_object":{"id":"c"},"id":"evt_r","type":"x"}`,
	`{"nested":{"id":"no","data":{"object":{"id":"no"}},"related_object":{"id":"no"},"account":"no"},"id":"evt_x","type":"x"}`,
	`{"d\u0061ta":{"obj\u0065ct":{"\u0069d":"in_esc"}},"\u0061ccount":"acct_esc","id":"evt_e","type":"x"}`,
	`[{"id":"evt_a","data":{"object":{"id":"no"}}}]`,
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
	var f Fields
	isObject, valid := ScanEvent(body, &f)
	if id, typ, o, v := Scan(body); string(id) != string(f.ID) || string(typ) != string(f.Type) || o != isObject || v != valid {
		t.Fatalf("%.200q: Scan and ScanEvent disagree", body)
	}
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
		if !fieldsEmpty(f) {
			t.Fatalf("%.200q: not an object, yet fields %+v", body, f)
		}
		return
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("%.200q: valid, yet Unmarshal fails: %v", body, err)
	}
	data := members(top["data"])
	dataObject, related := members(data["object"]), members(top["related_object"])
	want := map[string][2]json.RawMessage{
		"id": {f.ID, top["id"]}, "type": {f.Type, top["type"]}, "object": {f.Object, top["object"]},
		"livemode": {f.Livemode, top["livemode"]}, "account": {f.Account, top["account"]},
		"context": {f.Context, top["context"]}, "api_version": {f.APIVersion, top["api_version"]},
		"created": {f.Created, top["created"]}, "snapshot_event": {f.SnapshotEvent, top["snapshot_event"]},
		"reason":            {f.Reason, top["reason"]},
		"related_object.id": {f.RelatedID, related["id"]}, "related_object.type": {f.RelatedType, related["type"]},
		"data.object.id": {f.DataObjectID, dataObject["id"]}, "data.object.object": {f.DataObjectType, dataObject["object"]},
		"data.object.customer": {f.DataObjectCustomer, dataObject["customer"]},
	}
	for name, got := range want {
		if string(got[0]) != string(got[1]) {
			t.Fatalf("%.200q: %s is %s; Unmarshal finds %s", body, name, got[0], got[1])
		}
	}
}

// members decodes raw as an object of raw members; nil when it is none.
func members(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func fieldsEmpty(f Fields) bool {
	return f.ID == nil && f.Type == nil && f.DataObjectID == nil && f.RelatedID == nil
}

// BenchmarkScanEvent reads a thin event, the other shape ScanEvent meets.
func BenchmarkScanEvent(b *testing.B) {
	body := []byte(`{"id":"evt_test_65R9Ijk8g7lVdKD2zE1","object":"v2.core.event","type":"v1.invoice.paid",` +
		`"livemode":false,"created":"2025-11-01T12:00:00.000Z","context":"acct_1Nv0FGQ9RKHgCVdK",` +
		`"related_object":{"id":"in_1QcWq2LkdIwHu7ix","type":"invoice","url":"/v1/invoices/in_1QcWq2LkdIwHu7ix"},` +
		`"reason":{"type":"request","request":{"id":"req_v2abc","idempotency_key":"8f0e"}},"snapshot_event":"evt_1QcWq2LkdIwHu7ixM3gRXyZb"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var f Fields
		if _, valid := ScanEvent(body, &f); !valid {
			b.Fatal("invalid")
		}
	}
}
