package idp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
)

// DefaultRecheck is HOOKD_OIDC_RECHECK's default: how long a person the
// provider stopped letting in keeps their session at most, when the
// provider gives refresh tokens.
const DefaultRecheck = time.Hour

// RecheckConfig configures a Rechecker. Zero fields get the defaults.
type RecheckConfig struct {
	// Every is HOOKD_OIDC_RECHECK: how long after a sign-in, and after
	// each re-check, the person is asked about again.
	Every time.Duration
	// SessionMaxAge is HOOKD_SESSION_MAX_AGE: an account signed in longer
	// ago has no session left, and its refresh token is dropped.
	SessionMaxAge time.Duration
	// Poll is how often the accounts due are looked for. Default: 30 s,
	// or Every when shorter.
	Poll time.Duration
	// Retry is how soon an account is asked about again when the provider
	// could not be asked. Default: 5 minutes, or Every when shorter.
	Retry time.Duration
}

// Rechecker asks the provider again, with the refresh token of their
// latest sign-in, about each person signed in through it, every
// RecheckConfig.Every: one the provider now refuses (by their claims: no
// role, an unverified email, another domain) loses their account and with
// it every session; one whose refresh token it refuses has every session
// ended and signs in again; a provider that cannot be asked ends nobody's
// session. Each account is asked by one replica at a time.
type Rechecker struct {
	provider *Provider
	accounts *accounts.Store
	logger   *slog.Logger
	cfg      RecheckConfig
	service  *startstop.Service
}

// NewRechecker returns the re-check loop of provider over the accounts.
func NewRechecker(provider *Provider, store *accounts.Store, logger *slog.Logger, cfg RecheckConfig) *Rechecker {
	cfg.Every = cmp.Or(cfg.Every, DefaultRecheck)
	cfg.Poll = cmp.Or(cfg.Poll, min(30*time.Second, cfg.Every))
	cfg.Retry = cmp.Or(cfg.Retry, min(5*time.Minute, cfg.Every))
	cfg.SessionMaxAge = cmp.Or(cfg.SessionMaxAge, 12*time.Hour)
	r := &Rechecker{provider: provider, accounts: store, logger: logger.With("component", "oidc-recheck"), cfg: cfg}
	r.service = startstop.New(func(ctx context.Context) {
		startstop.Loop(ctx, nil, r.turn)
	})
	return r
}

// Run re-checks until ctx is cancelled.
func (r *Rechecker) Run(ctx context.Context) error { return r.service.Run(ctx) }

// recheckBatch is how many accounts one turn takes; a full batch goes
// again at once.
const recheckBatch = 20

func (r *Rechecker) turn(ctx context.Context) time.Duration {
	// The lease outlasts a turn of recheckBatch asks of at most the
	// HTTP client's timeout each.
	due, err := r.accounts.ClaimRechecks(ctx, recheckBatch, 10*time.Minute, r.cfg.SessionMaxAge)
	if err != nil {
		r.logger.ErrorContext(ctx, "claim re-checks", "err", err)
		return r.cfg.Poll
	}
	for _, a := range due {
		if err := r.recheck(ctx, a); err != nil {
			r.logger.ErrorContext(ctx, "re-check", "account", a.ID, "err", err)
		}
	}
	if len(due) == recheckBatch {
		return 0
	}
	return r.cfg.Poll
}

func (r *Rechecker) recheck(ctx context.Context, a accounts.Recheck) error {
	token, err := r.provider.OpenRefreshToken(a.Sealed)
	if err != nil {
		r.logger.WarnContext(ctx, "refresh token dropped", "account", a.ID, "err", err)
		_, _, err := r.finish(ctx, a, nil, a.Role)
		return err
	}
	id, err := r.provider.Recheck(ctx, token, a.OIDCSubject)
	switch {
	case errors.Is(err, ErrRefreshRefused):
		return r.endSessions(ctx, a, err)
	case err != nil:
		// The provider down, or an answer hookd cannot read: that says
		// nothing about the person, whose sessions stay.
		r.logger.WarnContext(ctx, "the identity provider could not be asked about a signed-in person",
			"account", a.ID, "issuer", r.provider.Issuer(), "err", err)
		return r.accounts.PostponeRecheck(ctx, a.ID, time.Now().Add(r.cfg.Retry))
	}
	role, err := r.provider.Role(id)
	if refusal, ok := errors.AsType[*Refusal](err); ok {
		_, err := Revoke(ctx, r.accounts, id, "re-check refused: "+refusal.Reason)
		return err
	}
	if err != nil {
		return err
	}
	sealed, err := r.provider.SealRefreshToken(id.Tokens.Refresh)
	if err != nil {
		return err
	}
	before, found, err := r.finish(ctx, a, sealed, role)
	if err == nil && found && before != role {
		r.logger.InfoContext(ctx, "re-check changed a role", "account", a.ID, "role", role, "was", before)
	}
	return err
}

func (r *Rechecker) finish(ctx context.Context, a accounts.Recheck, sealed []byte, role accounts.Role) (accounts.Role, bool, error) {
	var before accounts.Role
	var found bool
	err := r.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if before, found, err = tx.FinishRecheck(ctx, a.ID, sealed, role, time.Now().Add(r.cfg.Every)); err != nil || !found || before == role {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), AuditAccount(a.User), audit.AccountRole,
			fmt.Sprintf("%s: role %s, was %s, by the identity provider's groups at a re-check", ProviderTarget(a.User), role, before), 1)
	})
	return before, found, err
}

func (r *Rechecker) endSessions(ctx context.Context, a accounts.Recheck, why error) error {
	return r.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		u, found, err := tx.EndProviderSessions(ctx, a.ID)
		if err != nil || !found {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), AuditAccount(u), audit.SessionsEnd,
			ProviderTarget(u)+": "+why.Error(), 1)
	})
}

// Revoke removes the account of id, when there is one, after the
// provider refused id on claims it vouched for: the person's role and
// sessions go at once, audited with why. It reports whether there was an
// account.
func Revoke(ctx context.Context, store *accounts.Store, id Identity, why string) (bool, error) {
	var found bool
	err := store.InTx(ctx, func(tx *accounts.Tx) error {
		u, ok, err := tx.RevokeProviderAccount(ctx, id.Issuer, id.Subject)
		if err != nil || !ok {
			return err
		}
		found = true
		return audit.RecordAccount(ctx, tx.PgxTx(), AuditAccount(u), audit.AccessRevoked,
			fmt.Sprintf("%s: role %s and every session ended; %s", ProviderTarget(u), u.Role, why), 1)
	})
	return found, err
}

// AuditAccount names u in the audit log.
func AuditAccount(u accounts.User) audit.Account {
	return audit.Account{ID: u.ID, Email: u.Email, Issuer: u.OIDCIssuer, Subject: u.OIDCSubject}
}

// ProviderTarget names who the provider vouched for in the audit log: the
// issuer and subject, never a token.
func ProviderTarget(u accounts.User) string {
	return fmt.Sprintf("issuer %s, subject %s", u.OIDCIssuer, u.OIDCSubject)
}
