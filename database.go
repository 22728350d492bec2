package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/migrations"
)

// openPool connects to the database and checks it answers: pgxpool.New does
// not connect, and a wrong DATABASE_URL should stop the program at start.
func openPool(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	// Each webhook being processed holds a connection, since its transaction
	// holds the event's lock; pgxpool's default of max(4, CPUs) would cap
	// concurrent deliveries at 4. pool_max_conns in DATABASE_URL still wins.
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		pcfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database at %s: %v", describeDB(pcfg), err)
	}
	return pool, nil
}

// defaultMaxConns leaves room for three replicas under PostgreSQL's default
// max_connections of 100.
const defaultMaxConns = 30

func describeDB(c *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s as %s", c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Database, c.ConnConfig.User)
}

// openMigrated opens the pool and applies the pending migrations, returning
// the files it applied: every command that touches the database starts so.
func openMigrated(ctx context.Context, cfg Config) (*pgxpool.Pool, []string, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	applied, err := migrations.Up(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, applied, nil
}

func migrate(ctx context.Context, cfg Config, stdout io.Writer) error {
	pool, applied, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "migrate: schema is up to date")
	}
	for _, name := range applied {
		fmt.Fprintln(stdout, "migrate: applied", name)
	}
	return nil
}
