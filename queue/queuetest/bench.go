package queuetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PopulatedDatabaseURL returns the URL of a database for benchmarks, filled
// once by populate and kept: building one with millions of rows takes
// minutes, so later runs reuse it. It is named "hookd_bench_" + name + the
// migrations' hash, so a schema change builds a new one; like the template,
// it is filled under a temporary name and renamed only when complete, so an
// interrupted run leaves nothing half-filled to reuse.
//
// Only benchmarks should use it: the database outlives the run, and
// everything the benchmark changes in it stays. Drop old ones by hand with
// DROP DATABASE once the schema has moved on.
func PopulatedDatabaseURL(tb testing.TB, name string, populate func(ctx context.Context, pool *pgxpool.Pool) error) string {
	tb.Helper()
	ctx := context.Background()
	server := ServerURL()
	template.once.Do(func() { template.name, template.err = ensureTemplate(ctx, server) })
	if template.err != nil {
		tb.Fatalf("queuetest: %v", template.err)
	}
	hash, err := migrationsHash()
	if err != nil {
		tb.Fatalf("queuetest: %v", err)
	}
	dbName := "hookd_bench_" + name + "_" + hash

	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatalf("queuetest: connect to %s: %v", redact(server), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('hookd_queuetest_bench', 0))`); err != nil {
		tb.Fatalf("queuetest: lock bench database: %v", err)
	}
	defer admin.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('hookd_queuetest_bench', 0))`)

	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, dbName).Scan(&exists); err != nil {
		tb.Fatalf("queuetest: look for bench database: %v", err)
	}
	if exists {
		return withDatabase(server, dbName)
	}

	building := dbName + "_building"
	for _, sql := range []string{
		fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, building),
		fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, building, template.name),
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			tb.Fatalf("queuetest: create bench database: %v", err)
		}
	}
	tb.Logf("queuetest: populating %s once; later runs reuse it", dbName)
	start := time.Now()
	pool, err := pgxpool.New(ctx, withDatabase(server, building))
	if err != nil {
		tb.Fatalf("queuetest: open bench database: %v", err)
	}
	err = populate(ctx, pool)
	pool.Close()
	if err != nil {
		tb.Fatalf("queuetest: populate bench database: %v", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, building, dbName)); err != nil {
		tb.Fatalf("queuetest: publish bench database: %v", err)
	}
	tb.Logf("queuetest: populated %s in %s", dbName, time.Since(start).Round(time.Second))
	return withDatabase(server, dbName)
}

// PeakRSSMB returns the test process's peak resident set so far (VmHWM), in
// MB: for benchmarks that start a server in-process, what the server and its
// load generator held at most together.
func PeakRSSMB(tb testing.TB) float64 {
	tb.Helper()
	return peakRSSMB(tb, "/proc/self/status")
}

// ProcessPeakRSSMB returns the peak resident set so far (VmHWM), in MB, of
// the process pid: a hookd binary a test started, measured from outside.
func ProcessPeakRSSMB(tb testing.TB, pid int) float64 {
	tb.Helper()
	return peakRSSMB(tb, fmt.Sprintf("/proc/%d/status", pid))
}

func peakRSSMB(tb testing.TB, statusFile string) float64 {
	tb.Helper()
	status, err := os.ReadFile(statusFile)
	if err != nil {
		tb.Skipf("no %s to read the peak resident set from: %v", statusFile, err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				tb.Fatalf("parse VmHWM %q: %v", rest, err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmHWM in %s", statusFile)
	return 0
}
