package api_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

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

// docs/api.md's table of operations lists every operation of the
// document, with its scope, and nothing else.
func TestDocument_DocsListEveryOperation(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			want[fmt.Sprintf("| `%s %s%s` | %v |", method, api.Prefix, path, op.Extensions["x-hookd-scope"])] = true
		}
	}
	page, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(GET|POST|PUT|PATCH|DELETE) " + regexp.QuoteMeta(api.Prefix) + "[^`]*` \\| [a-z]+ \\|")
	for _, got := range row.FindAllString(string(page), -1) {
		if !want[got] {
			t.Errorf("docs/api.md lists %s, which is no operation of openapi.yaml with that scope", got)
		}
		delete(want, got)
	}
	for missing := range want {
		t.Errorf("docs/api.md does not list %s", missing)
	}
}
