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
			h, dbURL, err := startFileDrainTarget(ctx, o, cl, dir, bin, fmt.Sprintf("drainord%d%v", b, ordered), yaml)
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			targets = append(targets, &target{bin: bin, h: h, dbURL: dbURL, label: label, drainDest: orderedDest,
				drainOrdered: ordered})
		}
	}
	return targets, cl.run, nil
}

// startFileDrainTarget starts bin on a new database named name, with a
// destinations file of yaml written into dir, and the retry loop's quick
// interval the drain targets share; cl takes their cleanups.
func startFileDrainTarget(ctx context.Context, o options, cl *cleanups, dir, bin, name, yaml string) (*hookd, string, error) {
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		return nil, "", err
	}
	dbURL, drop, err := createDatabase(ctx, o.server, name)
	if err != nil {
		return nil, "", err
	}
	cl.add(drop)
	h, err := startHookd(ctx, bin, dbURL, "HOOKD_PROCESSOR=forward", "HOOKD_DESTINATIONS_FILE="+file,
		"HOOKD_RETRY_INTERVAL=100ms")
	if err != nil {
		return nil, "", err
	}
	cl.add(h.stop)
	return h, dbURL, nil
}

// printOrderedDrain prints, for each binary under -drain-ordered, its
// ordered drain over its unordered one, round by round and the median.
func printOrderedDrain(b *drainBench) {
	printTwinDrains(b, func(t *target) bool { return t.drainOrdered }, nil)
}

// printTwinDrains prints, for each target pick takes, its drain over its
// twin's, the target started just before it, round by round (each with
// what note says of the round's drain, when note is set) and the median.
func printTwinDrains(b *drainBench, pick func(*target) bool, note func(drainRound) string) {
	for j, t := range b.targets {
		if !pick(t) {
			continue
		}
		u := j - 1
		rates := make([]float64, len(b.hookd[j]))
		cpus := make([]float64, len(b.hookd[j]))
		each := make([]string, len(rates))
		for i := range rates {
			o, n := b.hookd[j][i], b.hookd[u][i]
			rates[i] = o.perSecond / n.perSecond
			cpus[i] = float64(o.hookdCPU+o.postgresCPU) / float64(n.hookdCPU+n.postgresCPU)
			each[i] = fmt.Sprintf("%.2f (CPU %.2f", rates[i], cpus[i])
			if note != nil {
				each[i] += ", " + note(o)
			}
			each[i] += ")"
		}
		id := func(x float64) float64 { return x }
		fmt.Printf("  %s over %s: events/s %s; median %.2f, CPU per event of hookd and its postgres backends median %.2f\n",
			t.name(), b.targets[u].name(), strings.Join(each, ", "), median(rates, id), median(cpus, id))
	}
}
