package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Replication is what a commit waits for on the database hookd writes to:
// whether it waits for a standby's flush before it returns, and the
// standbys streaming from it. It is what a 200 is worth across a failover:
// an event answered 200 survives a failover to a standby only if its
// commit waited for that standby.
type Replication struct {
	// SynchronousCommit and StandbyNames are the settings
	// synchronous_commit and synchronous_standby_names, as hookd's
	// sessions see them.
	SynchronousCommit string
	StandbyNames      string
	// Sync holds the application names of the standbys a commit waits for
	// now (sync_state sync or quorum), Async those it does not wait for
	// (async or potential), from pg_stat_replication. Both are empty when
	// the role may not read other sessions' replication state
	// (pg_read_all_stats) and Hidden is then set.
	Sync, Async []string
	Hidden      bool
}

// Waits says whether a commit waits for a standby: synchronous_commit at
// on, remote_write or remote_apply, and synchronous_standby_names naming
// one.
func (r Replication) Waits() bool {
	return r.StandbyNames != "" && slices.Contains([]string{"on", "remote_write", "remote_apply"}, r.SynchronousCommit)
}

// Replication reads what a commit waits for on the Store's database.
func (s *Store) Replication(ctx context.Context) (Replication, error) {
	var r Replication
	if err := s.db.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names')`).
		Scan(&r.SynchronousCommit, &r.StandbyNames); err != nil {
		return r, fmt.Errorf("read replication settings: %w", err)
	}
	r.StandbyNames = strings.TrimSpace(r.StandbyNames)
	rows, err := s.db.Query(ctx, `SELECT coalesce(application_name, ''), sync_state FROM pg_stat_replication ORDER BY 1`)
	if err != nil {
		return r, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var state *string
		if err := rows.Scan(&name, &state); err != nil {
			return r, fmt.Errorf("read pg_stat_replication: %w", err)
		}
		switch {
		case state == nil:
			r.Hidden = true
		case *state == "sync" || *state == "quorum":
			r.Sync = append(r.Sync, name)
		default:
			r.Async = append(r.Async, name)
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	return r, nil
}
