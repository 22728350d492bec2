// Package actions is every action of the dashboard, written once: the
// dashboard's handlers and /api/v1's call the same function. A write runs
// in one transaction with its audit entry, naming who acted (an Actor); a
// list pages by an opaque cursor.
package actions

import (
	"fmt"
	"log/slog"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

// Actions are the actions over hookd's stores.
type Actions struct {
	// queue is written by the actions; reads is what the lists and the
	// event read (the dashboard's reader, under its time limit).
	queue   *queue.Store
	reads   *queue.Store
	audit   *audit.Log
	control *worker.Control
	logger  *slog.Logger

	tokens     *tokens.Store
	accounts   *accounts.Store
	rejections *rejections.Store
	reconciler *reconcile.Reconciler
	replayer   Replayer
	stripe     *stripeapi.Client
	managed    ManagedDestinations
}

// Stores are what New takes: the queue the actions write, the reader
// their reads go through (nil reads Queue), the audit log, and this
// replica's copy of delivery control (nil where delivery runs elsewhere);
// then the API tokens (nil: on Queue's database), the accounts and the
// rejection log, and what some actions need when hookd has it: the
// reconciler (nil: reconciliation is off), this replica's runner of
// replays (nil: none here), and Stripe's API (nil: no STRIPE_API_KEY);
// and what the destinations' actions know of the configuration.
type Stores struct {
	Queue   *queue.Store
	Reads   *queue.Store
	Audit   *audit.Log
	Control *worker.Control
	Logger  *slog.Logger

	Tokens     *tokens.Store
	Accounts   *accounts.Store
	Rejections *rejections.Store
	Reconciler *reconcile.Reconciler
	Replayer   Replayer
	Stripe     *stripeapi.Client
	// Destinations is what the dashboard's destinations' actions know of
	// the configuration: the file, HOOKD_FORWARD_URL, the key.
	Destinations ManagedDestinations
}

// Replayer is this replica's runner of replays (worker.Replayer), as the
// actions tell it: a start wakes it, so that the replay starts at once; a
// cancel stops its batch of that replay from starting another delivery.
type Replayer interface {
	Wake()
	Cancelled(id int64)
}

// New returns the actions over s.
func New(s Stores) *Actions {
	a := &Actions{queue: s.Queue, reads: s.Reads, audit: s.Audit, control: s.Control, logger: s.Logger,
		tokens: s.Tokens, accounts: s.Accounts, rejections: s.Rejections, reconciler: s.Reconciler,
		replayer: s.Replayer, stripe: s.Stripe, managed: s.Destinations}
	if a.reads == nil {
		a.reads = a.queue
	}
	if a.audit == nil {
		a.audit = audit.New(a.queue.DB())
	}
	if a.tokens == nil {
		a.tokens = tokens.New(a.queue.DB())
	}
	if a.rejections == nil {
		a.rejections = rejections.New(a.reads.DB())
	}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	return a
}

// Token is the API token an action was taken with.
type Token struct {
	ID   int64
	Name string
}

// Actor is who takes an action: a person on the dashboard (Account), or an
// API token acting for its account (Token set).
type Actor struct {
	Account audit.Account
	Token   *Token
}

// auditAccount is the actor as its audit entry names it.
func (a Actor) auditAccount() audit.Account {
	acc := a.Account
	if a.Token != nil {
		acc.TokenID, acc.TokenName = a.Token.ID, a.Token.Name
	}
	return acc
}

// Name is the actor as a person reads it where hookd shows who did
// something (the pause banner): the account's email, and the token's name
// when a token acted.
func (a Actor) Name() string {
	if a.Token != nil {
		return fmt.Sprintf("%s (API token %s)", a.Account.Email, a.Token.Name)
	}
	return a.Account.Email
}

// InvalidError is a request an action refuses as it stands: Field names
// the input at fault (as the API calls it: reason, cursor), Detail says
// why and what would do.
type InvalidError struct {
	Field, Detail string
}

func (e *InvalidError) Error() string { return e.Detail }
