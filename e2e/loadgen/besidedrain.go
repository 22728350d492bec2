package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// besideDest is the second destination of a -drain-failing target: it
// takes the same events as the sink, and its app fails every call, or,
// in the healthy twin, takes each at once.
const besideDest = "beside"

// The paths of the beside destination's app on the sink's server.
const (
	besideFailingPath = "/beside-failing"
	besideHealthyPath = "/beside-healthy"
)

// startBesideDrainTargets starts, for each binary of -hookd, two more
// drain targets, each on a database of its own: the sink as a destination
// of a file beside a second destination taking the same events, healthy,
// and the same with the second one's app failing every call. The drain
// seeds a delivery of each event to both; the sink's drain is timed.
func startBesideDrainTargets(ctx context.Context, o options, sink *sink) ([]*target, func(), error) {
	dir, cl, err := tempDir("loadgen-beside-")
	if err != nil {
		return nil, nil, err
	}
	base := strings.TrimSuffix(sink.url, "/events")
	var targets []*target
	for b, bin := range strings.Split(o.hookd, ",") {
		for _, failing := range []bool{false, true} {
			path, label := besideHealthyPath, bin+", beside a healthy destination"
			if failing {
				path, label = besideFailingPath, fmt.Sprintf("%s, beside a destination answering %d", bin, o.failStatus)
			}
			yaml := fmt.Sprintf("destinations:\n  - name: %s\n    url: %s\n  - name: %s\n    url: %s%s\n",
				orderedDest, sink.url, besideDest, base, path)
			h, dbURL, err := startFileDrainTarget(ctx, o, cl, dir, bin, fmt.Sprintf("drainbeside%d%v", b, failing), yaml)
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			targets = append(targets, &target{bin: bin, h: h, dbURL: dbURL, label: label, drainDest: orderedDest,
				drainBeside: besideDest, besideFailing: failing})
		}
	}
	return targets, cl.run, nil
}

// settleBeside leaves target t's database as a round found it, once the
// sink's drain is timed: the healthy twin's deliveries to the second
// destination are waited for, the failing twin's, still retrying, are
// dropped, so that each round seeds the same backlog.
func settleBeside(ctx context.Context, conn *pgx.Conn, t *target) error {
	if t.besideFailing {
		_, err := conn.Exec(ctx, `DELETE FROM webhook_events WHERE destination = $1`, t.drainBeside)
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var left bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_events)`).Scan(&left); err != nil {
			return err
		}
		if !left {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the healthy second destination's deliveries not drained after 5 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// printBesideDrain prints, for each binary under -drain-failing, the
// sink's drain beside a failing destination over its drain beside a
// healthy one, round by round and the median.
func printBesideDrain(b *drainBench) {
	printTwinDrains(b, func(t *target) bool { return t.besideFailing }, func(r drainRound) string {
		return fmt.Sprintf("the failing app called %d times", r.besideCalls)
	})
}
