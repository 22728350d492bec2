package worker

import (
	"encoding/json"
	"testing"
)

// topLevelMembers finds the members json.Unmarshal would, in one pass over
// valid JSON: for every body here, both agree on the id and the type, or both
// refuse the body. (Unmarshal also takes null for an object with no members;
// parseEvent refuses it as not an object, a 400 either way.)
func TestParseEventAgreesWithUnmarshal(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
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
		`{"id":12,"type":"x"}`,
		`{"id":null,"type":"x"}`,
		`{"id":"evt_10"}`,
		`{}`,
		`[]`,
		`"id"`,
	} {
		var want struct {
			ID   json.RawMessage `json:"id"`
			Type json.RawMessage `json:"type"`
		}
		wantErr := json.Unmarshal([]byte(body), &want)
		id, typ, ok := topLevelMembers([]byte(body))
		if wantErr != nil {
			if ok {
				t.Errorf("%s: Unmarshal refused it (%v), topLevelMembers did not", body, wantErr)
			}
			continue
		}
		if !ok || string(id) != string(want.ID) || string(typ) != string(want.Type) {
			t.Errorf("%s: got %s, %s, %v; Unmarshal got %s, %s", body, id, typ, ok, want.ID, want.Type)
		}
	}
}
