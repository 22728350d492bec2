package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
)

// ReplicaDestinations checks that every live replica applies the same
// destinations, and the ones this configuration gives (hash, the hash of
// HOOKD_DESTINATIONS_FILE's set or of HOOKD_FORWARD_URL's one destination;
// "" when doctor read none): replicas that differ route the same event to
// different apps depending on which one Stripe reaches.
func ReplicaDestinations(ctx context.Context, databaseURL, hash string) Result {
	return withDatabase(ctx, databaseURL, "replica destinations", func(ctx context.Context, pool *pgxpool.Pool) Result {
		const name = "replica destinations"
		hashes, err := queue.New(pool).ReplicaDestinationHashes(ctx)
		if err != nil {
			return Result{name, Skip, "not checked: the schema is not migrated yet"}
		}
		groups, unapplied := queue.GroupDestinationHashes(hashes)
		starting := ""
		if unapplied > 0 {
			starting = fmt.Sprintf("; %s applied none (starting, or a hookd reconcile run)", count(unapplied, "live replica"))
		}
		switch {
		case len(groups) == 0:
			return Result{name, OK, "no hookd serve is running" + starting + "; each applies its destinations at start"}
		case len(groups) > 1:
			return Result{name, Warn, fmt.Sprintf("live replicas apply different destinations: %s%s; an event is routed "+
				"by whichever replica Stripe reaches: give every replica the same HOOKD_DESTINATIONS_FILE and send the ones "+
				"that differ SIGHUP (with HOOKD_FORWARD_URL, the same URL, and restart them)", describeGroups(groups, hash), starting)}
		case hash != "" && groups[0].Hash != hash:
			return Result{name, Warn, fmt.Sprintf("%s; this configuration's are %s: doctor read another "+
				"HOOKD_DESTINATIONS_FILE (or HOOKD_FORWARD_URL) than the replicas run with; check it, or give them this one "+
				"and send them SIGHUP", describeGroups(groups, hash), queue.ShortHash(hash)+starting)}
		}
		return Result{name, OK, fmt.Sprintf("%s%s", describeGroups(groups, hash), starting)}
	})
}

// describeGroups says how many replicas apply which destinations: "2 live
// replicas apply 3f9a0c1b2d4e (this configuration's), 1 applies
// 77c1e0aa9b31".
func describeGroups(groups []queue.HashGroup, own string) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		verb := "apply"
		if g.Replicas == 1 {
			verb = "applies"
		}
		who := fmt.Sprint(g.Replicas)
		if i == 0 {
			who = count(g.Replicas, "live replica")
		}
		parts[i] = who + " " + verb + " destinations " + queue.ShortHash(g.Hash)
		if g.Hash == own {
			parts[i] += " (this configuration's)"
		}
	}
	return strings.Join(parts, ", ")
}
