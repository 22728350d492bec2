package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hookd/hookd/internal/store/tokens"
)

// scopeNone is the x-hookd-scope of an operation served without a token;
// the others name a tokens.Scope.
const scopeNone = "none"

// specYAML is the API's document, the source of the generated code.
//
//go:embed openapi.yaml
var specYAML []byte

// document is openapi.yaml loaded, which GET /api/v1/openapi.json serves
// as JSON (committed as openapi.json).
var document = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(specYAML)
	if err != nil {
		return nil, fmt.Errorf("web/api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the embedded OpenAPI document is not valid: %w", err)
	}
	return doc, nil
})

// DocumentJSON is the OpenAPI document as GET /api/v1/openapi.json serves
// it, and as web/api/openapi.json commits it.
func DocumentJSON() ([]byte, error) {
	doc, err := document()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// operation is one operation of the document, with the scope it needs.
type operation struct {
	id, method, path string
	item             *openapi3.PathItem
	op               *openapi3.Operation
	scope            string
}

// operations lists the document's operations, each with its
// x-hookd-scope, which every operation must say.
func operations(doc *openapi3.T) ([]operation, error) {
	var ops []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			scope, _ := op.Extensions["x-hookd-scope"].(string)
			switch scope {
			case scopeNone, string(tokens.ScopeRead), string(tokens.ScopeOperate), string(tokens.ScopeAdmin):
			default:
				return nil, fmt.Errorf("%s %s: x-hookd-scope %q is not none, read, operate or admin", method, path, scope)
			}
			ops = append(ops, operation{id: op.OperationID, method: method, path: path, item: item, op: op, scope: scope})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].id < ops[j].id })
	return ops, nil
}

// echoPath is the document's path p as the generated code registers it
// with echo, under Prefix: {id} becomes :id.
func echoPath(p string) string {
	var b strings.Builder
	b.WriteString(Prefix)
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			continue
		}
		b.WriteByte('/')
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			seg = ":" + seg[1:len(seg)-1]
		}
		b.WriteString(seg)
	}
	return b.String()
}
