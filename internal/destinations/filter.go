package destinations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// eventFields are the top-level fields of a Stripe event (a v1 event, and
// a thin v2 event's related_object and reason), the variables a filter
// reads. A field the event leaves out is null, so `account == null` says
// an event is the platform's own.
var eventFields = []string{"id", "object", "type", "data", "livemode", "account", "created",
	"api_version", "request", "pending_webhooks", "context", "related_object", "reason"}

// filterTimeout bounds one filter's run on one event when it loops (a
// macro such as all or exists, a comprehension), the one way a filter's
// work grows faster than the event: a comprehension over a list inside
// another over it would hold a receiver for minutes on a large list.
// CEL's cost limit is no bound here: tracking the cost made such a filter
// over a 20,000-item list ten to a hundred times slower, and still took
// seconds to stop it. A filter that needs longer fails on the event.
const filterTimeout = 100 * time.Millisecond

// filterInterruptEvery is how many iterations of a comprehension run
// between two looks at the filter's deadline.
const filterInterruptEvery = 100

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
	prg, err := env.Program(ast, cel.InterruptCheckFrequency(filterInterruptEvery))
	if err != nil {
		return fieldError(who, "filter", "%s", celError(err))
	}
	d.program = prg
	d.loops = len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()),
		celast.KindMatcher(celast.ComprehensionKind))) > 0
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
	val, err := d.run(act)
	if errors.Is(err, context.DeadlineExceeded) {
		return false, fmt.Errorf("filter: ran past %s on this event, and was stopped", filterTimeout)
	}
	if err != nil {
		return false, fmt.Errorf("filter: %s", oneLine(err.Error()))
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Errorf("filter: gave %s, %w", val.Type().TypeName(), errNotBool)
	}
	return b, nil
}

// run runs the filter on the event's fields, a filter that loops under
// its deadline; one that does not is linear in the event, and runs without
// the cost of a timer.
func (d *Destination) run(act *activation) (ref.Val, error) {
	if !d.loops {
		val, _, err := d.program.Eval(act.vars)
		return val, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), filterTimeout)
	defer cancel()
	val, _, err := d.program.ContextEval(ctx, act.vars)
	return val, err
}
