package destinations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// file is a destinations file as written: the one key destinations.
type file struct {
	Destinations []entry `yaml:"destinations"`
}

// entry is one destination as written, before it is checked. Rate is a
// pointer, and Types, Accounts and Endpoints are checked for nil, so that
// a value given as zero or empty is told apart from one left out.
type entry struct {
	Name             string            `yaml:"name"`
	URL              string            `yaml:"url"`
	Types            []string          `yaml:"types"`
	Livemode         string            `yaml:"livemode"`
	Accounts         []string          `yaml:"accounts"`
	Endpoints        []string          `yaml:"endpoints"`
	Filter           string            `yaml:"filter"`
	Rate             *float64          `yaml:"rate"`
	Concurrency      int               `yaml:"concurrency"`
	Timeout          string            `yaml:"timeout"`
	OrderBy          string            `yaml:"order_by"`
	SigningSecretEnv string            `yaml:"signing_secret_env"`
	HeadersEnv       map[string]string `yaml:"headers_env"`
}

// fieldWants says what each key's value must be, for a value of the wrong
// YAML kind.
var fieldWants = map[string]string{
	"types":       "a list of strings, like [a, b]",
	"accounts":    "a list of strings, like [a, b]",
	"endpoints":   "a list of strings, like [a, b]",
	"headers_env": "a map of header names to variable names, like {Authorization: APP_AUTH}",
	"concurrency": "a whole number",
	"rate":        "a number",
}

// decode reads data's one YAML document, refusing a key it does not know:
// a misspelt key would otherwise be a setting silently left at its
// default.
func decode(data []byte) ([]entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no destinations: the file is empty")
		}
		return nil, decodeError(data, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document (---): a destinations file is one")
	}
	if len(f.Destinations) == 0 {
		return nil, errors.New("no destinations: the file must list at least one under destinations")
	}
	return f.Destinations, nil
}

// decodeError turns the YAML decoder's error, several lines at times, into
// one line naming the destination and the key: a type error's line is
// found in the document's node tree; a syntax error is said as is.
func decodeError(data []byte, err error) error {
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) || len(typeErr.Errors) == 0 {
		return errors.New(oneLine(err.Error()))
	}
	first := typeErr.Errors[0]
	line, msg := splitLine(first)
	var root yaml.Node
	if line == 0 || yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return errors.New(oneLine(first))
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping with the key destinations (line %d)", line)
	}
	key, value := lastKeyAt(doc, line)
	if key == nil {
		return errors.New(oneLine(first))
	}
	if key.Value != "destinations" {
		return fmt.Errorf("unknown key %q (line %d): a destinations file holds one key, destinations", key.Value, key.Line)
	}
	if value.Kind != yaml.SequenceNode {
		return fmt.Errorf("destinations: want a list of destinations (line %d)", value.Line)
	}
	return entryError(value, line, msg)
}

// entryError says the type error at line, within the list of destinations
// seq, of the destination and the key it falls in.
func entryError(seq *yaml.Node, line int, msg string) error {
	i := -1
	for j, item := range seq.Content {
		if item.Line <= line {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("destinations: %s (line %d)", msg, line)
	}
	item := seq.Content[i]
	who := fmt.Sprintf("destinations[%d]", i)
	if item.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: want a mapping of a destination's keys (line %d)", who, item.Line)
	}
	if _, name := lastKeyNamed(item, "name"); name != nil && nameRE.MatchString(name.Value) {
		who = fmt.Sprintf("destination %q", name.Value)
	}
	if unknown, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(unknown, " not found in type"); ok {
			return fmt.Errorf("%s: unknown key %q (line %d)", who, name, line)
		}
	}
	key, value := lastKeyAt(item, line)
	if key == nil {
		return fmt.Errorf("%s: %s (line %d)", who, msg, line)
	}
	if strings.HasPrefix(msg, "mapping key ") && strings.Contains(msg, " already defined") {
		return fmt.Errorf("%s: %s: given twice (line %d)", who, key.Value, line)
	}
	want, ok := fieldWants[key.Value]
	if !ok {
		want = "a string"
	}
	if value.Kind == yaml.ScalarNode {
		return fmt.Errorf("%s: %s: %q is not %s (line %d)", who, key.Value, value.Value, want, line)
	}
	return fmt.Errorf("%s: %s: want %s (line %d)", who, key.Value, want, line)
}

// lastKeyAt is the key of mapping m (and its value) that starts last at
// or before line: the key whose value holds line.
func lastKeyAt(m *yaml.Node, line int) (key, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Line <= line {
			key, value = m.Content[i], m.Content[i+1]
		}
	}
	return key, value
}

// lastKeyNamed is mapping m's key name and its value, or nils.
func lastKeyNamed(m *yaml.Node, name string) (key, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name {
			key, value = m.Content[i], m.Content[i+1]
		}
	}
	return key, value
}

// lineRE is how the YAML decoder starts each of a type error's lines.
var lineRE = regexp.MustCompile(`^line (\d+): `)

// splitLine parses "line N: message" into N and the message; 0 and msg
// when it says no line.
func splitLine(msg string) (int, string) {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, msg
	}
	n, _ := strconv.Atoi(m[1])
	return n, msg[len(m[0]):]
}

// oneLine joins a message's lines, without their indentation, so that an
// error fits the one line a log or a terminal gives it.
func oneLine(msg string) string {
	return strings.Join(strings.Fields(msg), " ")
}
