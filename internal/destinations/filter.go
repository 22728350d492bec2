package destinations

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// eventFields are the top-level fields of a Stripe event (a v1 event, and
// a thin v2 event's related_object and reason), the variables a filter
// reads. A field the event leaves out is null, so `account == null` says
// an event is the platform's own.
var eventFields = []string{"id", "object", "type", "data", "livemode", "account", "created",
	"api_version", "request", "pending_webhooks", "context", "related_object", "reason"}

// filterCostLimit bounds one filter's work on one event, so that a filter
// looping over a large list in a large event cannot hold a receiver: far
// above what a comparison of fields costs.
const filterCostLimit = 1_000_000

// celEnv is the one environment every filter compiles in: each event
// field a dyn, and numbers comparable across int and double, since JSON's
// numbers are doubles and `amount >= 1000` is written with an int.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{cel.CrossTypeNumericComparisons(true)}
	for _, f := range eventFields {
		opts = append(opts, cel.Variable(f, cel.DynType))
	}
	return cel.NewEnv(opts...)
})

// compile compiles the destination's filter, which must give a bool (or a
// dyn, whose value is checked on each event).
func (d *Destination) compile(who string) error {
	if strings.TrimSpace(d.Filter) == "" {
		d.Filter = ""
		return nil
	}
	env, err := celEnv()
	if err != nil {
		return fieldError(who, "filter", "%v", err)
	}
	ast, iss := env.Compile(d.Filter)
	if iss.Err() != nil {
		return fieldError(who, "filter", "%s", celError(iss.Err()))
	}
	if out := ast.OutputType(); !out.IsExactType(types.BoolType) && !out.IsExactType(types.DynType) {
		return fieldError(who, "filter", "gives %s, not a bool (true takes the event)", out)
	}
	prg, err := env.Program(ast, cel.CostLimit(filterCostLimit))
	if err != nil {
		return fieldError(who, "filter", "%s", celError(err))
	}
	d.program = prg
	return nil
}

// celError is CEL's error on one line: each error's first line, without
// the source excerpt and caret CEL draws under it, and without the empty
// container it names, which says nothing here.
func celError(err error) string {
	var lines []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "|") || strings.TrimSpace(line) == "" {
			continue
		}
		lines = append(lines, strings.TrimSpace(strings.ReplaceAll(line, " (in container '')", "")))
	}
	return strings.Join(lines, "; ")
}

// activation is one event's fields, as a filter reads them; parsed once
// for every destination Route asks.
type activation struct {
	vars interpreter.Activation
	err  error
}

// parseEvent reads payload's top-level fields: a number is a double, as
// JSON has no other.
func parseEvent(payload []byte) *activation {
	v, err := decodeJSON(payload)
	fields, ok := v.(map[string]any)
	if err != nil || !ok {
		return &activation{err: errors.New("the event is not a JSON object")}
	}
	for _, f := range eventFields {
		if _, ok := fields[f]; !ok {
			fields[f] = nil
		}
	}
	vars, err := interpreter.NewActivation(fields)
	return &activation{vars: vars, err: err}
}

// errNotBool is a filter whose value on an event was not a bool.
var errNotBool = errors.New("not a bool")

// eval runs the destination's filter on the event's fields: an error is a
// filter that failed on this event (a missing field, a wrong type).
func (d *Destination) eval(act *activation) (bool, error) {
	if act.err != nil {
		return false, fmt.Errorf("filter: %w", act.err)
	}
	val, _, err := d.program.Eval(act.vars)
	if err != nil {
		return false, fmt.Errorf("filter: %s", oneLine(err.Error()))
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Errorf("filter: gave %s, %w", val.Type().TypeName(), errNotBool)
	}
	return b, nil
}
