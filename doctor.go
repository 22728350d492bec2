package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/worker"
)

// doctorCommand runs `hookd doctor`: every check of package doctor against
// the configuration hookd serve would run with, one line each. It exits
// non-zero only when a check fails.
func doctorCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig("doctor", args, getenv, stderr)
	if err != nil {
		return err
	}
	results := doctor.Run(ctx, doctor.Config{
		DatabaseURL:       cfg.DatabaseURL,
		AdminEmail:        cfg.AdminEmail,
		StripeSecrets:     reveal(cfg.StripeSecrets),
		Endpoints:         cfg.Endpoints,
		Discard:           cfg.Processor == processorDiscard,
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
			GroupsClaim: cfg.OIDCGroupsClaim, Roles: cfg.OIDCRoles, RedirectURL: oidcRedirectURL(cfg),
			PasswordSignInOff: cfg.PasswordSignInOff, EmergencyAdmin: cfg.EmergencyAdmin},
	})
	if failed := doctor.Write(stdout, results); failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", failed, len(results))
	}
	return nil
}
