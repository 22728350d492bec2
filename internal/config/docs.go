package config

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// The settings table is the one source of hookd's configuration reference:
// `hookd serve -h` prints it, and the tables of docs/configuration.md (every
// setting) and README.md (the essential ones) are rendered from it between
// markers, held to it by TestDocs_TablesAreGenerated. Regenerate them with
// `make docs`.
const (
	markerAll       = "<!-- settings: all -->"
	markerEssential = "<!-- settings: essential -->"
	markerEnd       = "<!-- end settings -->"
)

// writeTable renders the settings that keep selects as a Markdown table.
func writeTable(w io.Writer, keep func(setting) bool) {
	fmt.Fprintln(w, "| variable | flag | default | what it sets |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, s := range settings {
		if !keep(s) {
			continue
		}
		def := "none"
		if s.def != "" {
			def = "`" + s.def + "`"
		}
		usage := strings.ReplaceAll(s.usage, "|", `\|`)
		fmt.Fprintf(w, "| `%s` | `-%s` | %s | %s |\n", s.env, s.flag, def, usage)
	}
}

// renderInto replaces what sits between marker and markerEnd in doc with
// the table of the settings keep selects.
func renderInto(doc []byte, marker string, keep func(setting) bool) ([]byte, error) {
	start := bytes.Index(doc, []byte(marker))
	if start < 0 {
		return nil, fmt.Errorf("no %s marker", marker)
	}
	start += len(marker)
	end := bytes.Index(doc[start:], []byte(markerEnd))
	if end < 0 {
		return nil, fmt.Errorf("no %s after %s", markerEnd, marker)
	}
	var table bytes.Buffer
	table.WriteString("\n")
	writeTable(&table, keep)
	out := append([]byte{}, doc[:start]...)
	out = append(out, table.Bytes()...)
	return append(out, doc[start+end:]...), nil
}

func everySetting(setting) bool       { return true }
func essentialSetting(s setting) bool { return s.essential }
