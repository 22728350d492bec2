package api_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/hookd/hookd/web/api"
)

var update = flag.Bool("update", false, "rewrite openapi.json from openapi.yaml (make api)")

// The committed openapi.json is the document the API serves, which the
// generated code embeds from openapi.yaml: make api rewrites it.
func TestDocument_CommittedJSONIsTheYAML(t *testing.T) {
	want, err := api.DocumentJSON()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("web/api/openapi.json is not openapi.yaml's document: run make api")
	}
}
