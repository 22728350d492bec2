package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
)

// managedSync names the managed services whose replication is synchronous
// below PostgreSQL, where a commit waits for the standby's storage and
// PostgreSQL shows no standby: Replication's warning is expected there.
const managedSync = "on RDS Multi-AZ instances and Cloud SQL HA the standby is kept in step below PostgreSQL, " +
	"which PostgreSQL cannot show: there this warning is expected and nothing answered 200 is lost"

// Replication says what a 200 is worth across a failover: whether a
// commit waits for a standby (synchronous_commit, synchronous_standby_names,
// pg_stat_replication). A commit that waits for none is a warning: with
// asynchronous standbys, a failover can lose events already answered 200,
// which Stripe never delivers again.
func Replication(ctx context.Context, databaseURL string) Result {
	return withDatabase(ctx, databaseURL, "replication", func(ctx context.Context, pool *pgxpool.Pool) Result {
		const name = "replication"
		r, err := queue.New(pool).Replication(ctx)
		if err != nil {
			return Result{name, Warn, fmt.Sprintf("could not read it: %v", err)}
		}
		settings := fmt.Sprintf("synchronous_commit %s, synchronous_standby_names '%s'", r.SynchronousCommit, r.StandbyNames)
		async := ""
		if len(r.Async) > 0 {
			async = fmt.Sprintf("; asynchronous: %s", strings.Join(r.Async, ", "))
		}
		switch {
		case r.Waits() && len(r.Sync) > 0:
			return Result{name, OK, fmt.Sprintf("a commit waits for standby %s (%s%s): a failover to it loses nothing answered 200",
				strings.Join(r.Sync, ", "), settings, async)}
		case r.Waits() && r.Hidden:
			return Result{name, OK, fmt.Sprintf("a commit waits for a standby (%s); grant pg_read_all_stats to see which", settings)}
		case r.Waits():
			return Result{name, Warn, fmt.Sprintf("a commit waits for a standby (%s), and none is streaming: "+
				"every commit hangs, and hookd answers 503, until one is", settings)}
		case len(r.Async) > 0:
			return Result{name, Warn, fmt.Sprintf("a commit waits for no standby (%s), and the standbys %s are asynchronous: "+
				"a failover to one can lose events already answered 200, which Stripe never delivers again; "+
				"name one in synchronous_standby_names, or reconcile after a failover (STRIPE_API_KEY); %s",
				settings, strings.Join(r.Async, ", "), managedSync)}
		}
		return Result{name, Warn, fmt.Sprintf("a commit waits for no standby (%s) and no standby is streaming from this server: "+
			"a failover to a replica kept asynchronously can lose events already answered 200; %s", settings, managedSync)}
	})
}
