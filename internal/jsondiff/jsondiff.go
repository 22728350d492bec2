// Package jsondiff compares two JSON objects field by field: the object an
// event carried when Stripe created it, and the same object as Stripe
// holds it now. It walks nested objects and arrays down to their scalar
// fields and names each one that was added, removed or changed by its
// path, such as status or lines.data[0].amount.
package jsondiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// MaxChanges bounds what Diff returns: past it, Truncated says so.
const MaxChanges = 200

// Kind is what happened to a field.
type Kind string

const (
	Added   Kind = "added"
	Removed Kind = "removed"
	Changed Kind = "changed"
)

// Change is one scalar field that differs. Before and After are its JSON
// text, empty when the field is absent on that side; a field whose value
// changed between a scalar and an object or array is one change, with the
// compact JSON of the object or array.
type Change struct {
	Path          string
	Kind          Kind
	Before, After string
}

// Result is the changes, in path order.
type Result struct {
	Changes []Change
	// Truncated is true when more than MaxChanges fields differ.
	Truncated bool
}

// Diff compares before and after, both JSON values (usually objects).
func Diff(before, after []byte) (Result, error) {
	var b, a any
	if err := decode(before, &b); err != nil {
		return Result{}, fmt.Errorf("the first object: %w", err)
	}
	if err := decode(after, &a); err != nil {
		return Result{}, fmt.Errorf("the second object: %w", err)
	}
	var r Result
	walk(&r, "", b, a, true, true)
	return r, nil
}

// decode keeps numbers as written, so 2000 and 2000.0 differ only if the
// API wrote them differently, and large ids stay exact.
func decode(raw []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// walk records in r how the values at path differ: b before, a after,
// hasB and hasA false for a side where the field is absent.
func walk(r *Result, path string, b, a any, hasB, hasA bool) {
	if r.Truncated {
		return
	}
	if hasB && hasA {
		bm, bIsMap := b.(map[string]any)
		am, aIsMap := a.(map[string]any)
		if bIsMap && aIsMap {
			walkObjects(r, path, bm, am)
			return
		}
		bl, bIsList := b.([]any)
		al, aIsList := a.([]any)
		if bIsList && aIsList {
			walkLists(r, path, bl, al)
			return
		}
	}
	// A field present on one side only is reported at each of its scalar
	// leaves, so a new nested object shows what it holds.
	if !hasB || !hasA {
		v := a
		if !hasA {
			v = b
		}
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				walk(r, join(path, k), pick(hasB, m[k]), pick(hasA, m[k]), hasB, hasA)
			}
			return
		}
	}
	r.add(path, b, a, hasB, hasA)
}

// walkObjects walks the fields of two objects, of either or both, in
// key order.
func walkObjects(r *Result, path string, bm, am map[string]any) {
	keys := slices.Sorted(maps.Keys(bm))
	for k := range am {
		if _, ok := bm[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		bv, okB := bm[k]
		av, okA := am[k]
		walk(r, join(path, k), bv, av, okB, okA)
	}
}

// walkLists walks two arrays element by element: the longer one's extra
// elements were added or removed.
func walkLists(r *Result, path string, bl, al []any) {
	for i := range max(len(bl), len(al)) {
		p := path + "[" + strconv.Itoa(i) + "]"
		switch {
		case i >= len(bl):
			walk(r, p, nil, al[i], false, true)
		case i >= len(al):
			walk(r, p, bl[i], nil, true, false)
		default:
			walk(r, p, bl[i], al[i], true, true)
		}
	}
}

// add records the field at path as a change when its JSON text differs,
// or it is on one side only; past MaxChanges, r is truncated instead.
func (r *Result) add(path string, b, a any, hasB, hasA bool) {
	bt, at := text(b, hasB), text(a, hasA)
	if hasB == hasA && bt == at {
		return
	}
	if len(r.Changes) == MaxChanges {
		r.Truncated = true
		return
	}
	kind := Changed
	switch {
	case !hasB:
		kind = Added
	case !hasA:
		kind = Removed
	}
	r.Changes = append(r.Changes, Change{Path: path, Kind: kind, Before: bt, After: at})
}

func pick(has bool, v any) any {
	if has {
		return v
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func text(v any, has bool) string {
	if !has {
		return ""
	}
	b, _ := json.Marshal(v) // decoded JSON always marshals
	return string(b)
}
