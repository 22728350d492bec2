package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// Scopes an operation may need (x-hookd-scope), as the tokens have them;
// scopeNone is an operation served without a token.
const (
	scopeNone    = "none"
	scopeRead    = "read"
	scopeOperate = "operate"
	scopeAdmin   = "admin"
)

// document is openapi.yaml as the generated code embeds it, and the JSON
// GET /api/v1/openapi.json serves (committed as openapi.json).
var document = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("the embedded OpenAPI document: %w", err)
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
			case scopeNone, scopeRead, scopeOperate, scopeAdmin:
			default:
				return nil, fmt.Errorf("%s %s: x-hookd-scope %q is not none, read, operate or admin", method, path, scope)
			}
			ops = append(ops, operation{id: op.OperationID, method: method, path: path, item: item, op: op, scope: scope})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].id < ops[j].id })
	return ops, nil
}
