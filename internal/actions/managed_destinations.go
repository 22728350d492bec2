package actions

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// The destinations admins manage on the dashboard, while no
// HOOKD_DESTINATIONS_FILE is set: add, edit and remove, each in one
// transaction with its audit entry. A destination is checked exactly as a
// file's is; its signing secrets and headers are sealed under
// HOOKD_DESTINATIONS_KEY. Every replica reloads its set when
// queue.Store.ManagedVersion changes.

// ManagedDestinations is what the actions on the dashboard's destinations
// know of hookd's configuration.
type ManagedDestinations struct {
	// File is HOOKD_DESTINATIONS_FILE: while set, it names every
	// destination, and the dashboard changes none.
	File string
	// ForwardURL is HOOKD_FORWARD_URL, whose destination is default.
	ForwardURL string
	// Key is HOOKD_DESTINATIONS_KEY decoded; nil when unset, and then a
	// destination can have no signing secret and no header.
	Key []byte
	// Endpoints are the labels of the endpoints hookd serves (those of
	// STRIPE_WEBHOOK_SECRETS); a destination's endpoints must name them,
	// as a file's must. None checks no label.
	Endpoints []string
	// ForwardRate is HOOKD_FORWARD_RATE: the rate of every destination
	// that sets none of its own; 0 for none.
	ForwardRate float64
}

// ErrDestinationsFromFile is a change of a destination while
// HOOKD_DESTINATIONS_FILE is set.
var ErrDestinationsFromFile = errors.New("HOOKD_DESTINATIONS_FILE is set: the file names every destination, and " +
	"the dashboard changes none; change the file and send hookd SIGHUP")

// DestinationRefusedError is a change of a destination refused as things
// stand: a name taken, a destination that is not the dashboard's.
type DestinationRefusedError struct {
	Reason string
}

func (e *DestinationRefusedError) Error() string { return e.Reason }

// DestinationsConfig is what the actions know of the destinations'
// configuration, for the pages: whether they may change one, and offer
// secrets.
func (a *Actions) DestinationsConfig() ManagedDestinations { return a.managed }

// ManagedDestination returns destination name's row; queue.ErrNotFound
// when there is none.
func (a *Actions) ManagedDestination(ctx context.Context, name string) (queue.ManagedDestination, error) {
	return a.queue.ManagedDestination(ctx, name)
}

// checkDestination checks e as a file's destination is checked, and as
// the dashboard needs: its endpoints those hookd serves, no credential in
// its URL, a key for its values (values says whether any are written).
func (a *Actions) checkDestination(e destinations.Entry, values bool) (*destinations.Destination, error) {
	e.Source = destinations.SourceDashboard
	d, err := destinations.CheckEntry(e)
	if err == nil && len(a.managed.Endpoints) > 0 {
		err = (&destinations.Set{Destinations: []*destinations.Destination{d}}).CheckEndpoints(a.managed.Endpoints)
	}
	var fe *destinations.FieldError
	if errors.As(err, &fe) {
		return nil, &InvalidError{Field: fe.Field, Detail: fe.Error() + "."}
	}
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(d.URL); err == nil && u.User != nil {
		return nil, &InvalidError{Field: "url", Detail: fmt.Sprintf("destination %q: url: holds a user or a password, which "+
			"would be kept and shown in the clear; give the credential as a header (Authorization), kept encrypted.", d.Name)}
	}
	if values && len(a.managed.Key) == 0 {
		field := "signing_secrets"
		if len(d.SigningSecrets) == 0 {
			field = "headers"
		}
		return nil, &InvalidError{Field: field, Detail: fmt.Sprintf("destination %q: %s: not kept without "+
			"HOOKD_DESTINATIONS_KEY, the key they are encrypted under: set it on every replica (openssl rand -base64 32), "+
			"or leave the signing secrets and headers out.", d.Name, field)}
	}
	return d, nil
}

// refuseChange refuses every change while the file names the
// destinations, and a change of HOOKD_FORWARD_URL's default.
func (a *Actions) refuseChange(name string) error {
	if a.managed.File != "" {
		return ErrDestinationsFromFile
	}
	if name == destinations.DefaultName && a.managed.ForwardURL != "" {
		return &DestinationRefusedError{Reason: fmt.Sprintf("%s is HOOKD_FORWARD_URL's destination: it is changed "+
			"in hookd's environment, not here", destinations.DefaultName)}
	}
	return nil
}

// AddDestination adds a destination managed on the dashboard, and audits
// it. A retired destination of the same name (deliveries waiting) is
// configured again; a name any other destination has is refused.
func (a *Actions) AddDestination(ctx context.Context, who Actor, e destinations.Entry) (queue.ManagedDestination, error) {
	if err := a.refuseChange(e.Name); err != nil {
		return queue.ManagedDestination{}, err
	}
	d, err := a.checkDestination(e, len(e.SigningSecrets) > 0 || len(e.Headers) > 0)
	if err != nil {
		return queue.ManagedDestination{}, err
	}
	err = a.queue.InTx(ctx, func(tx *queue.Tx) error {
		err := tx.AddManagedDestination(ctx, queue.ManagedWrite{Destination: d, By: who.Name()}, a.managed.Key)
		if errors.Is(err, queue.ErrDestinationTaken) {
			return &DestinationRefusedError{Reason: fmt.Sprintf("another destination is named %s; choose another name", d.Name)}
		}
		if err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.DestinationAdd, destinationText(d), 1)
	})
	if err != nil {
		return queue.ManagedDestination{}, err
	}
	return a.queue.ManagedDestination(ctx, d.Name)
}

// destinationText names a destination in the audit log: its name and its
// URL as hookd shows it.
func destinationText(d *destinations.Destination) string {
	return d.Name + " (" + d.DisplayURL() + ")"
}

// DestinationEdit is an edit of a dashboard destination: Entry is its new
// settings, by its name. Its signing secrets and headers replace those
// kept when ReplaceSecrets and ReplaceHeaders say so (none clears them);
// otherwise those kept stay, as a form that never shows them sends none.
type DestinationEdit struct {
	Entry          destinations.Entry
	ReplaceSecrets bool
	ReplaceHeaders bool
}

// DestinationChange is what an edit did: Changed names the fields it
// changed, none when it changed nothing (no entry then).
type DestinationChange struct {
	Destination queue.ManagedDestination
	Changed     []string
}

// EditDestination changes a dashboard destination, and audits it, naming
// the fields changed (never their secret values).
func (a *Actions) EditDestination(ctx context.Context, who Actor, edit DestinationEdit) (DestinationChange, error) {
	name := edit.Entry.Name
	if err := a.refuseChange(name); err != nil {
		return DestinationChange{}, err
	}
	e := edit.Entry
	if !edit.ReplaceSecrets {
		e.SigningSecrets = nil
	}
	if !edit.ReplaceHeaders {
		e.Headers = nil
	}
	d, err := a.checkDestination(e, len(e.SigningSecrets) > 0 || len(e.Headers) > 0)
	if err != nil {
		return DestinationChange{}, err
	}
	var out DestinationChange
	err = a.queue.InTx(ctx, func(tx *queue.Tx) error {
		before, err := tx.ManagedDestinationForUpdate(ctx, name)
		if err != nil {
			return err
		}
		if err := refuseNotManaged(before); err != nil {
			return err
		}
		out.Changed = changedFields(before, d, edit)
		if len(out.Changed) == 0 {
			return nil
		}
		w := queue.ManagedWrite{Destination: d, WriteSecrets: edit.ReplaceSecrets, WriteHeaders: edit.ReplaceHeaders, By: who.Name()}
		if err := tx.EditManagedDestination(ctx, w, a.managed.Key); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.DestinationEdit,
			d.Name+": "+strings.Join(out.Changed, ", "), 1)
	})
	if err != nil {
		return DestinationChange{}, err
	}
	out.Destination, err = a.queue.ManagedDestination(ctx, name)
	return out, err
}

// refuseNotManaged refuses a change of a destination the dashboard does
// not manage, or one retired.
func refuseNotManaged(m queue.ManagedDestination) error {
	switch {
	case m.Source == destinations.SourceForwardURL:
		return &DestinationRefusedError{Reason: fmt.Sprintf("%s is HOOKD_FORWARD_URL's destination: it is changed "+
			"in hookd's environment, not here", m.Name)}
	case m.Source != destinations.SourceDashboard:
		return &DestinationRefusedError{Reason: fmt.Sprintf("%s came from a destinations file, and is kept while "+
			"deliveries to it wait; add a destination to take its place", m.Name)}
	case m.RetiredAt != nil:
		return &DestinationRefusedError{Reason: fmt.Sprintf("%s is retired; add it again to configure it anew", m.Name)}
	}
	return nil
}

// changedFields names the fields the edit changes of the row before.
func changedFields(before queue.ManagedDestination, d *destinations.Destination, edit DestinationEdit) []string {
	was := before.Entry()
	var out []string
	add := func(field string, changed bool) {
		if changed {
			out = append(out, field)
		}
	}
	add("url", was.URL != d.URL)
	add("types", !slices.Equal(was.Types, d.Types))
	add("livemode", was.Livemode != d.Livemode)
	add("accounts", !slices.Equal(was.Accounts, d.Accounts))
	add("endpoints", !slices.Equal(was.Endpoints, d.Endpoints))
	add("filter", was.Filter != d.Filter)
	add("concurrency", was.Concurrency != d.Concurrency)
	timeout := ""
	if d.Timeout > 0 {
		timeout = d.Timeout.String()
	}
	add("timeout", was.Timeout != timeout)
	add("rate", was.Rate != d.Rate)
	add("order_by", was.OrderBy != d.OrderBy)
	add("signing secrets", edit.ReplaceSecrets && (before.SigningSecretsSet || len(d.SigningSecrets) > 0))
	add("headers", edit.ReplaceHeaders && (before.HeadersSet || len(d.Headers) > 0))
	return out
}

// DestinationRemoval is what a removal did, or would do (DryRun): the
// destination, the deliveries to it waiting on the queue (dead ones
// included, counted up to 100,000), and whether it is kept retired for
// them rather than deleted.
type DestinationRemoval struct {
	Destination queue.ManagedDestination
	Waiting     int64
	Retired     bool
	DryRun      bool
}

// RemoveDestination removes a dashboard destination, and audits it: it
// gets no new event; kept retired while deliveries to it wait, for
// support to move or drop them, deleted otherwise. dryRun only reads
// what it would do, to ask before; what it does is decided when it does.
func (a *Actions) RemoveDestination(ctx context.Context, who Actor, name string, dryRun bool) (DestinationRemoval, error) {
	if err := a.refuseChange(name); err != nil {
		return DestinationRemoval{}, err
	}
	r := DestinationRemoval{DryRun: dryRun}
	if dryRun {
		var err error
		if r.Destination, err = a.queue.ManagedDestination(ctx, name); err != nil {
			return r, err
		}
		if err := refuseNotManaged(r.Destination); err != nil {
			return r, err
		}
		r.Waiting, err = a.queue.DeliveriesWaiting(ctx, name)
		r.Retired = r.Waiting > 0
		return r, err
	}
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if r.Destination, err = tx.ManagedDestinationForUpdate(ctx, name); err != nil {
			return err
		}
		if err := refuseNotManaged(r.Destination); err != nil {
			return err
		}
		if r.Waiting, err = tx.DeliveriesWaiting(ctx, name); err != nil {
			return err
		}
		if r.Retired, err = tx.RemoveManagedDestination(ctx, name); err != nil {
			return err
		}
		target := name + ": deleted, nothing waiting"
		if r.Retired {
			target = fmt.Sprintf("%s: retired, %d deliveries waiting", name, r.Waiting)
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.DestinationRemove, target, 1)
	})
	return r, err
}
