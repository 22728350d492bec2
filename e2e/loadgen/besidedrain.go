package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
			file := filepath.Join(dir, fmt.Sprintf("drain-beside-%d-%v.yaml", b, failing))
			if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
				cl.run()
				return nil, nil, err
			}
			dbURL, drop, err := createDatabase(ctx, o.server, fmt.Sprintf("drainbeside%d%v", b, failing))
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			cl.add(drop)
			h, err := startHookd(ctx, bin, dbURL, "HOOKD_PROCESSOR=forward", "HOOKD_DESTINATIONS_FILE="+file,
				"HOOKD_RETRY_INTERVAL=100ms")
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			cl.add(h.stop)
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
	for j, t := range b.targets {
		if !t.besideFailing {
			continue
		}
		u := j - 1 // its healthy twin, started just before it
		rates := make([]float64, len(b.hookd[j]))
		cpus := make([]float64, len(b.hookd[j]))
		each := make([]string, len(rates))
		for i := range rates {
			f, h := b.hookd[j][i], b.hookd[u][i]
			rates[i] = f.perSecond / h.perSecond
			cpus[i] = float64(f.hookdCPU+f.postgresCPU) / float64(h.hookdCPU+h.postgresCPU)
			each[i] = fmt.Sprintf("%.2f (CPU %.2f, the failing app called %d times)", rates[i], cpus[i], f.besideCalls)
		}
		id := func(x float64) float64 { return x }
		fmt.Printf("  %s over %s: events/s %s; median %.2f, CPU per event of hookd and its postgres backends median %.2f\n",
			t.name(), b.targets[u].name(), strings.Join(each, ", "), median(rates, id), median(cpus, id))
	}
}
