package migrations

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// State is how a database's schema stands against this binary's migrations.
type State struct {
	// Known is how many migrations this binary embeds.
	Known int
	// Pending are the files of this binary's migrations the database has
	// not applied, in order: hookd serve or hookd migrate applies them.
	Pending []string
	// Unknown are versions applied to the database that this binary does
	// not embed: a newer hookd migrated it.
	Unknown []int64
}

// Check reads the database's migration state and changes nothing: unlike
// goose's own status, it creates no version table in a database that has
// none, so `hookd doctor` may point at any database.
func Check(ctx context.Context, pool *pgxpool.Pool) (State, error) {
	known, err := versions()
	if err != nil {
		return State{}, err
	}
	st := State{Known: len(known)}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return State{}, fmt.Errorf("read migration state: %w", err)
	}
	applied := map[int64]bool{}
	if exists {
		rows, err := pool.Query(ctx, `SELECT DISTINCT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied`)
		if err != nil {
			return State{}, fmt.Errorf("read migration state: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				return State{}, fmt.Errorf("read migration state: %w", err)
			}
			applied[v] = true
		}
		if err := rows.Err(); err != nil {
			return State{}, fmt.Errorf("read migration state: %w", err)
		}
	}
	for _, k := range known {
		if !applied[k.version] {
			st.Pending = append(st.Pending, k.file)
		}
		delete(applied, k.version)
	}
	for v := range applied {
		st.Unknown = append(st.Unknown, v)
	}
	slices.Sort(st.Unknown)
	return st, nil
}

type migration struct {
	version int64
	file    string
}

// versions lists the embedded migrations by the number their file name
// starts with, as goose numbers them.
func versions() ([]migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, name := range names {
		prefix, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version number", name)
		}
		out = append(out, migration{v, name})
	}
	slices.SortFunc(out, func(a, b migration) int { return int(a.version - b.version) })
	return out, nil
}
