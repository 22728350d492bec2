package endpoint

import (
	"fmt"
	"log/slog"
	"strings"
)

// String is the endpoint as logs and errors may show it: its secrets
// redacted, since a Config or an Endpoint printed with %v must not leak
// them.
func (e Endpoint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", e.Label, e.Kind)
	if e.Connect {
		b.WriteString(", connect")
	}
	if e.StripeID != "" {
		fmt.Fprintf(&b, ", %s", e.StripeID)
	}
	fmt.Fprintf(&b, ", test events %s, %d secrets REDACTED)", e.TestEvents, len(e.Secrets))
	return b.String()
}

// LogValue redacts the secrets in slog output.
func (e Endpoint) LogValue() slog.Value { return slog.StringValue(e.String()) }
