package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// orderedDest is the destination the drain's backlog is for under
// -drain-ordered.
const orderedDest = "sink"

// startOrderedDrainTargets starts, for each binary of -hookd, two more
// drain targets, each on a database of its own: the sink as a destination
// of a file, unordered, and the same ordered by customer.
func startOrderedDrainTargets(ctx context.Context, o options, sink *sink) ([]*target, func(), error) {
	dir, cl, err := tempDir("loadgen-ordered-")
	if err != nil {
		return nil, nil, err
	}
	var targets []*target
	for b, bin := range strings.Split(o.hookd, ",") {
		for _, ordered := range []bool{false, true} {
			yaml := fmt.Sprintf("destinations:\n  - name: %s\n    url: %s\n", orderedDest, sink.url)
			label := bin + ", a destination of a file"
			if ordered {
				yaml += "    order_by: data.object.customer\n"
				label += fmt.Sprintf(", ordered by customer (%d keys)", orderKeys)
			}
			file := filepath.Join(dir, fmt.Sprintf("drain-%d-%v.yaml", b, ordered))
			if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
				cl.run()
				return nil, nil, err
			}
			dbURL, drop, err := createDatabase(ctx, o.server, fmt.Sprintf("drainord%d%v", b, ordered))
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
				drainOrdered: ordered})
		}
	}
	return targets, cl.run, nil
}

// printOrderedDrain prints, for each binary under -drain-ordered, its
// ordered drain over its unordered one, round by round and the median.
func printOrderedDrain(b *drainBench) {
	for j, t := range b.targets {
		if !t.drainOrdered {
			continue
		}
		u := j - 1 // started just before it
		rates := make([]float64, len(b.hookd[j]))
		cpus := make([]float64, len(b.hookd[j]))
		each := make([]string, len(rates))
		for i := range rates {
			o, n := b.hookd[j][i], b.hookd[u][i]
			rates[i] = o.perSecond / n.perSecond
			cpus[i] = float64(o.hookdCPU+o.postgresCPU) / float64(n.hookdCPU+n.postgresCPU)
			each[i] = fmt.Sprintf("%.2f (CPU %.2f)", rates[i], cpus[i])
		}
		id := func(x float64) float64 { return x }
		fmt.Printf("  %s over %s: events/s %s; median %.2f, CPU per event of hookd and its postgres backends median %.2f\n",
			t.name(), b.targets[u].name(), strings.Join(each, ", "), median(rates, id), median(cpus, id))
	}
}
