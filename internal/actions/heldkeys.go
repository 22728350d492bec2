package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// HeldKeys reads the keys of ordered destinations that a dead event holds,
// of destination or of every one when it is "", oldest first: the
// destinations page lists them with a release each. A destination that
// does not exist is not found.
func (a *Actions) HeldKeys(ctx context.Context, destination string) ([]queue.HeldKey, error) {
	if destination != "" {
		switch _, err := a.reads.Destination(ctx, destination); {
		case errors.Is(err, queue.ErrNotFound):
			return nil, &NotFoundError{What: "destination " + destination}
		case err != nil:
			return nil, err
		}
	}
	return a.reads.HeldKeys(ctx, destination)
}

// Released is what a release of a held key did, or would do on a dry
// run: the dead events it took out of the key's order, which stay dead,
// and how many deliveries of the key waited behind them.
type Released struct {
	Destination, Key string
	EventIDs         []string
	Waiting          int
	DeadSince        time.Time
}

// ReleaseHeldKey lets key of the ordered destination go on past its dead
// events, with the reason the audit entry keeps (optional), and audits it
// naming the events released: they stay dead, out of the key's order, and
// the key's next delivery is sent when its turn comes. A dry run says what
// it would release and changes nothing. A key no dead event holds is
// refused: it has nothing to release.
func (a *Actions) ReleaseHeldKey(ctx context.Context, who Actor, destination, key, reason string, dryRun bool) (Released, error) {
	reason = strings.Join(strings.Fields(reason), " ")
	switch {
	case key == "":
		return Released{}, &InvalidError{Field: "key", Detail: "Say which key to release: the destinations page lists the held ones."}
	case utf8.RuneCountInString(reason) > MaxPauseReason:
		return Released{}, &InvalidError{Field: "reason", Detail: "The reason is longer than 200 characters; shorten it."}
	}
	var r Released
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		held, err := tx.HeldKey(ctx, destination, key)
		if err != nil {
			return err
		}
		r = Released{Destination: destination, Key: key, EventIDs: []string{held.EventID}, Waiting: held.Waiting,
			DeadSince: held.DeadSince}
		if dryRun {
			return nil
		}
		if r.EventIDs, err = tx.ReleaseHeldKey(ctx, destination, key); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.OrderRelease,
			releaseTarget(destination, key, r.EventIDs, reason), int64(len(r.EventIDs)))
	})
	if errors.Is(err, queue.ErrNotFound) {
		return Released{}, a.notHeld(ctx, destination, key)
	}
	return r, err
}

// notHeld is the refusal of a release of a key nothing holds: the
// destination is missing, or the key is not held.
func (a *Actions) notHeld(ctx context.Context, destination, key string) error {
	switch _, err := a.queue.Destination(ctx, destination); {
	case errors.Is(err, queue.ErrNotFound):
		return &NotFoundError{What: "destination " + destination}
	case err != nil:
		return err
	}
	return &ConflictError{Detail: fmt.Sprintf("Key %q of destination %s is not held: no dead event of it waits, "+
		"so there is nothing to release. It was released, or its dead event retried, already.", key, destination)}
}

// releaseTarget is a release as its audit entry names it: the destination,
// the key, the events released and the reason, when one was given.
func releaseTarget(destination, key string, ids []string, reason string) string {
	t := fmt.Sprintf("%s key %s: %s", destination, key, strings.Join(ids, ", "))
	if reason != "" {
		t += ": " + reason
	}
	return t
}
