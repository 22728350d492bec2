package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// walReader counts what one database's transactions wrote to PostgreSQL's
// WAL between two positions, with pg_waldump over the server's pg_wal, as
// .ci/bench/wal.sh does: PostgreSQL runs on this machine and the load
// generator can read its data directory (root, or the postgres user).
type walReader struct {
	waldump string
	walDir  string
}

// newWALReader finds pg_waldump and the server's pg_wal.
func newWALReader(ctx context.Context, server string) (*walReader, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var dataDir, version string
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory'), current_setting('server_version_num')`).
		Scan(&dataDir, &version); err != nil {
		return nil, fmt.Errorf("-wal: read the server's data directory: %w", err)
	}
	major := version[:len(version)-4]
	waldump, err := exec.LookPath(filepath.Join("/usr/lib/postgresql", major, "bin", "pg_waldump"))
	if err != nil {
		if waldump, err = exec.LookPath("pg_waldump"); err != nil {
			return nil, fmt.Errorf("-wal: no pg_waldump for PostgreSQL %s", major)
		}
	}
	return &walReader{waldump: waldump, walDir: filepath.Join(dataDir, "pg_wal")}, nil
}

// walMark is a WAL position, taken before a phase, on the database whose
// transactions are to be counted, with the connection whose temporary
// replication slot keeps the server from removing the WAL after it until
// since has read it (a checkpoint of other work on the server would).
type walMark struct {
	lsn  string
	oid  uint32
	conn *pgx.Conn
}

// start checkpoints, so that every phase begins with the same full-page
// writes ahead of it, and returns the WAL position from which to count
// dbURL's database's transactions; since must be called to let it go.
func (w *walReader) start(ctx context.Context, dbURL string) (walMark, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return walMark{}, err
	}
	m := walMark{conn: conn}
	slot := fmt.Sprintf("hookd_loadgen_%d", os.Getpid())
	_, err = conn.Exec(ctx, `CHECKPOINT`)
	if err == nil {
		_, err = conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, slot)
	}
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, oid FROM pg_database WHERE datname = current_database()`).
			Scan(&m.lsn, &m.oid)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return walMark{}, err
	}
	return m, nil
}

// walCount is what one database's transactions wrote to the WAL.
type walCount struct {
	bytes, records, commits int64
	err                     error
}

var (
	walTx     = regexp.MustCompile(`tx: +(\d+)`)
	walLen    = regexp.MustCompile(`len \(rec/tot\): +\d+/ *(\d+)`)
	walAnyRel = regexp.MustCompile(`rel \d+/(\d+)/`)
)

// since counts, from m to the current insert position, the records of the
// transactions that touched m's database (and those with no transaction,
// such as pruning, that name one of its relations), their bytes with their
// full-page images, and the commit records among them: the commits that
// wrote to the database, each flushed to disk before it returns (a
// read-only transaction writes no commit record). A transaction that
// wrote only unlogged rows names no database and is not counted.
func (w *walReader) since(ctx context.Context, m walMark) walCount {
	conn := m.conn
	// Closing the connection drops its temporary slot.
	defer conn.Close(context.WithoutCancel(ctx))
	var end string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
		return walCount{err: err}
	}
	// pg_waldump reads what is on disk: wait for the flush to pass the end.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var flushed bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed); err != nil {
			return walCount{err: err}
		}
		if flushed {
			break
		}
		if time.Now().After(deadline) {
			return walCount{err: fmt.Errorf("WAL not flushed to %s after 30 s", end)}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd := exec.CommandContext(ctx, w.waldump, "-p", w.walDir, "-s", m.lsn, "-e", end)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return walCount{err: err}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return walCount{err: err}
	}
	c := countWAL(bufio.NewScanner(out), strconv.FormatUint(uint64(m.oid), 10))
	if err := cmd.Wait(); err != nil && c.err == nil {
		c.err = fmt.Errorf("pg_waldump: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return c
}

// countWAL reads pg_waldump's lines and counts the records of database oid.
func countWAL(lines *bufio.Scanner, oid string) walCount {
	type tx struct {
		bytes, records, commits int64
		mine                    bool
	}
	txs := map[string]*tx{}
	var c walCount
	lines.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for lines.Scan() {
		line := lines.Text()
		t, l := walTx.FindStringSubmatch(line), walLen.FindStringSubmatch(line)
		if t == nil || l == nil {
			continue
		}
		size, _ := strconv.ParseInt(l[1], 10, 64)
		rels := walAnyRel.FindAllStringSubmatch(line, -1)
		mine := slices.ContainsFunc(rels, func(r []string) bool { return r[1] == oid })
		if t[1] == "0" {
			if mine {
				c.bytes += size
				c.records++
			}
			continue
		}
		x := txs[t[1]]
		if x == nil {
			x = &tx{}
			txs[t[1]] = x
		}
		x.bytes += size
		x.records++
		x.mine = x.mine || mine
		if strings.Contains(line, "desc: COMMIT") {
			x.commits++
		}
	}
	for _, x := range txs {
		if x.mine {
			c.bytes += x.bytes
			c.records += x.records
			c.commits += x.commits
		}
	}
	c.err = lines.Err()
	return c
}

// storedPayload returns the bytes a marker's payload takes in dbURL's
// database (compressed, as PostgreSQL stores it), on average over its
// markers, or 0 when it has none or no such column (the plain handler).
func storedPayload(ctx context.Context, dbURL string) float64 {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var avg *float64
	if err := conn.QueryRow(ctx, `SELECT avg(pg_column_size(payload))::float8 FROM processed_webhook_events`).Scan(&avg); err != nil || avg == nil {
		return 0
	}
	return *avg
}
