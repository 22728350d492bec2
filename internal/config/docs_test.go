package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated settings tables of README.md and docs/configuration.md")

// TestDocs_TablesAreGenerated holds the settings tables of
// docs/configuration.md and README.md to the settings table: a setting
// added, removed or reworded fails here until `make docs` renders them.
func TestDocs_TablesAreGenerated(t *testing.T) {
	for _, doc := range []struct {
		path   string
		marker string
		keep   func(setting) bool
	}{
		{"docs/configuration.md", markerAll, everySetting},
		{"README.md", markerEssential, essentialSetting},
	} {
		path := filepath.Join("..", "..", doc.path)
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rendered, err := renderInto(old, doc.marker, doc.keep)
		if err != nil {
			t.Fatalf("%s: %v", doc.path, err)
		}
		if bytes.Equal(old, rendered) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, rendered, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s's settings table differs from the settings table: run make docs", doc.path)
	}
}

// TestHelp_ListsEverySetting: `hookd serve -h` names every variable.
func TestHelp_ListsEverySetting(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	if _, err := Parse("serve", []string{"-h"}, envOf(nil), &help); err == nil {
		t.Fatal("-h: want flag.ErrHelp")
	}
	for _, s := range settings {
		if !bytes.Contains(help.Bytes(), []byte("$"+s.env)) {
			t.Errorf("-h does not list %s", s.env)
		}
	}
}
