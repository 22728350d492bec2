package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/worker"
)

// doctorCommand runs `hookd doctor`: every check of package doctor against
// the configuration hookd serve would run with, one line each. It exits
// non-zero only when a check fails.
func doctorCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Parse("doctor", args, getenv, stderr)
	if err != nil {
		return err
	}
	results := doctor.Run(ctx, doctor.Config{
		DatabaseURL:       cfg.DatabaseURL,
		AdminEmail:        cfg.AdminEmail,
		StripeSecrets:     config.Reveal(cfg.StripeSecrets),
		Endpoints:         cfg.Endpoints,
		Discard:           cfg.Processor == config.ProcessorDiscard,
		ForwardURL:        cfg.ForwardURL,
		ForwardSecret:     cfg.ForwardSecret.Reveal(),
		ForwardTimeout:    cfg.ForwardTimeout,
		MaxForwardTimeout: worker.MaxForwardTimeout,
		MarkerRetention:   cfg.MarkerRetention,
		DemoBackoff:       cfg.DemoBackoff,
		StripeAPIKey:      cfg.StripeAPIKey.Reveal(),
		StripeEndpointID:  cfg.StripeEndpointID,
		StripeAPIURL:      cfg.StripeAPIURL,
		StripeBudget:      stripeapi.NewBudget(cfg.StripeAPIRate),
		PublicURL:         cfg.PublicURL,
		SecureCookies:     cfg.SecureCookies,
		Addr:              cfg.Addr,
		MetricsAddr:       cfg.MetricsAddr,
		MetricsPublic:     cfg.MetricsPublic,
		OIDC: doctor.OIDC{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret.Reveal(),
			GroupsClaim: cfg.OIDCGroupsClaim, Roles: cfg.OIDCRoles, RedirectURL: config.OIDCRedirectURL(cfg),
			PasswordSignInOff: cfg.PasswordSignInOff, EmergencyAdmin: cfg.EmergencyAdmin,
			AllowedDomains: cfg.OIDCAllowedDomains, Recheck: cfg.OIDCRecheck, Alerts: cfg.AlertURL != ""},
		DestinationsHash: destinationsHash(cfg),
	})
	results = append(results, traceCheck(ctx, cfg.Trace))
	if failed := doctor.Write(stdout, results); failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", failed, len(results))
	}
	return nil
}

// traceCheck says whether traces are exported and, when they are, sends
// the collector one span as hookd serve would: a collector that refuses
// it, or is not there, is a warning, since traces failing never stops a
// delivery.
func traceCheck(ctx context.Context, e tracing.Export) doctor.Result {
	const name = "traces"
	if !e.On() {
		return doctor.Result{Check: name, Status: doctor.OK, Detail: "off: OTEL_EXPORTER_OTLP_ENDPOINT is not set"}
	}
	where := cmp.Or(e.TracesEndpoint, e.Endpoint)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	traceID, err := tracing.Probe(ctx, e, buildVersion())
	if err != nil {
		return doctor.Result{Check: name, Status: doctor.Warn, Detail: fmt.Sprintf(
			"the collector at %s refused a test span, so hookd serve's spans would be lost: %v (check the endpoint and OTEL_EXPORTER_OTLP_HEADERS)",
			worker.DisplayURL(where), worker.WithoutURL(err))}
	}
	return doctor.Result{Check: name, Status: doctor.OK, Detail: fmt.Sprintf(
		"exported over OTLP/HTTP to %s, which took a test span %s, trace %s", worker.DisplayURL(where), tracing.SpanDoctor, traceID)}
}

// destinationsHash is the hash of the destinations cfg gives, as hookd
// serve applies them; "" when it gives none.
func destinationsHash(cfg config.Config) string {
	if cfg.Destinations == nil {
		return ""
	}
	return cfg.Destinations.Hash
}
