package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// destSpec is one configuration of hookd's destinations in the receiver
// rounds under -destinations: count apps that answer 200, and with failing
// one more that answers 500 to every call.
type destSpec struct {
	count   int
	file    bool // through HOOKD_DESTINATIONS_FILE rather than HOOKD_FORWARD_URL
	failing bool
	// ordered: each destination has order_by: data.object.customer.
	ordered bool
}

func (s destSpec) String() string {
	if !s.file {
		return "1 destination (HOOKD_FORWARD_URL)"
	}
	label := fmt.Sprintf("%d destinations (file)", s.count)
	if s.count == 1 {
		label = "1 destination (file)"
	}
	if s.ordered {
		label = strings.Replace(label, "(file)", fmt.Sprintf("(file, ordered by customer, %d keys)", orderKeys), 1)
	}
	if s.failing {
		label += " + 1 failing"
	}
	return label
}

// parseDestinations reads -destinations: counts, comma-separated. 1 is
// HOOKD_FORWARD_URL alone, the one-app path; 1f is one destination in a
// file; N of 2 or more is a file of N; No (1o, 3o) is N in a file, each
// ordered by customer. With failing, every file configuration N has two
// twins: N and one more destination that fails every call, and N+1 all
// healthy, unless the list has it already. The failing twin is compared
// with both: N+1 healthy is the same work with nothing failing, what the
// failure costs; N healthy adds the cost of calling one more destination.
func parseDestinations(list string, failing bool) ([]destSpec, error) {
	var specs []destSpec
	add := func(s destSpec) {
		if !slices.Contains(specs, s) {
			specs = append(specs, s)
		}
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		file, ordered := strings.HasSuffix(f, "f"), strings.HasSuffix(f, "o")
		n, err := strconv.Atoi(strings.TrimRight(f, "fo"))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-destinations: %q is not a count of destinations (1, 1f, 3, 1o...)", f)
		}
		s := destSpec{count: n, file: file || ordered || n > 1, ordered: ordered}
		add(s)
		if failing && s.file {
			add(s.failingTwin())
			add(s.healthyTwin())
		}
	}
	if failing && !slices.ContainsFunc(specs, func(s destSpec) bool { return s.failing }) {
		return nil, fmt.Errorf("-failing-destination needs a configuration with a file in -destinations (1f, 3...)")
	}
	return specs, nil
}

// failingTwin is s with one more destination, failing every call.
func (s destSpec) failingTwin() destSpec {
	s.failing = true
	return s
}

// healthyTwin is s's failing twin with that destination healthy: the same
// calls, none failing.
func (s destSpec) healthyTwin() destSpec {
	s.count++
	return s
}

// failingName is the destination that answers 500 to every call.
const failingName = "down"

// destApps is the users' apps of the destinations, in this process: each
// target's destination name has a path of its own, /t<target>/<name>, and
// the apps count their calls by path. The one named failingName answers
// failStatus, the others 200.
type destApps struct {
	url   string
	srv   *http.Server
	calls sync.Map // path → *atomic.Int64
}

func startDestApps(failStatus int) (*destApps, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &destApps{url: "http://" + ln.Addr().String()}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if c, ok := a.calls.Load(r.URL.Path); ok {
			c.(*atomic.Int64).Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/"+failingName) {
			http.Error(w, "the app fails every call", failStatus)
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// path registers the app of target i's destination name and returns its path.
func (a *destApps) path(i int, name string) string {
	p := fmt.Sprintf("/t%d/%s", i, name)
	a.calls.LoadOrStore(p, new(atomic.Int64))
	return p
}

// count returns the calls the app at path has had.
func (a *destApps) count(path string) int64 {
	c, ok := a.calls.Load(path)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

func (a *destApps) close() { _ = a.srv.Close() }

// destEnv returns hookd's environment for target i's spec, writing its
// destinations file into dir, and the paths of its healthy apps, then of
// its failing one, if any.
func destEnv(apps *destApps, dir string, i int, s destSpec) (env, paths []string, err error) {
	env = []string{"HOOKD_PROCESSOR=forward"}
	if !s.file {
		p := apps.path(i, "default")
		return append(env, "HOOKD_FORWARD_URL="+apps.url+p), []string{p}, nil
	}
	var yaml strings.Builder
	yaml.WriteString("destinations:\n")
	for k := range s.count {
		name := fmt.Sprintf("app%d", k+1)
		p := apps.path(i, name)
		paths = append(paths, p)
		fmt.Fprintf(&yaml, "  - name: %s\n    url: %s%s\n", name, apps.url, p)
		if s.ordered {
			yaml.WriteString("    order_by: data.object.customer\n")
		}
	}
	if s.failing {
		p := apps.path(i, failingName)
		paths = append(paths, p)
		fmt.Fprintf(&yaml, "  - name: %s\n    url: %s%s\n", failingName, apps.url, p)
	}
	file := filepath.Join(dir, fmt.Sprintf("destinations-t%d.yaml", i))
	if err := os.WriteFile(file, []byte(yaml.String()), 0o600); err != nil {
		return nil, nil, err
	}
	return append(env, "HOOKD_DESTINATIONS_FILE="+file), paths, nil
}

// startDestTargets starts one hookd per binary of -hookd and configuration
// of -destinations, each on a database of its own, forwarding to apps.
func startDestTargets(ctx context.Context, o options, apps *destApps) ([]*target, func(), error) {
	dir, cl, err := tempDir("loadgen-destinations-")
	if err != nil {
		return nil, nil, err
	}
	var targets []*target
	for _, bin := range strings.Split(o.hookd, ",") {
		for _, s := range o.destSpecs {
			i := len(targets)
			env, paths, err := destEnv(apps, dir, i, s)
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			if o.failingRetries {
				env = append(env, "HOOKD_DEMO_BACKOFF=true")
			}
			dbURL, drop, err := createDatabase(ctx, o.server, fmt.Sprintf("recv%d", i))
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			cl.add(drop)
			h, err := startHookd(ctx, bin, dbURL, env...)
			if err != nil {
				cl.run()
				return nil, nil, err
			}
			cl.add(h.stop)
			spec := s
			t := &target{bin: bin, h: h, dbURL: dbURL, label: bin + ", " + s.String(), spec: &spec, healthy: paths}
			if s.failing {
				t.healthy, t.failing = paths[:len(paths)-1], paths[len(paths)-1]
			}
			targets = append(targets, t)
		}
	}
	return targets, cl.run, nil
}

// meters is what the receiver rounds measure beside CPU and latency: the
// destinations' apps' calls (-destinations) and the WAL (-wal); either may
// be nil.
type meters struct {
	apps *destApps
	wal  *walReader
}

// calls returns the calls each of t's healthy apps has had, then its
// failing one's, if any.
func (m meters) calls(t *target) []int64 {
	if m.apps == nil {
		return nil
	}
	out := make([]int64, 0, len(t.healthy)+1)
	for _, p := range t.healthy {
		out = append(out, m.apps.count(p))
	}
	if t.failing != "" {
		out = append(out, m.apps.count(t.failing))
	}
	return out
}

// printPhaseExtras prints what -wal and -destinations measured of one
// target's phase.
func printPhaseExtras(t *target, res loadResult, r receiverRound) {
	var parts []string
	if res.wal != (walCount{}) {
		if r.walErr != nil {
			parts = append(parts, fmt.Sprintf("WAL not counted: %v", r.walErr))
		} else {
			parts = append(parts, fmt.Sprintf("WAL per event %.0f B (%.1f records, %.3f flushed commits); payload sent %.0f B, WAL over it %.0f B",
				r.wal, r.walRecords, r.commits, r.payload, r.wal-r.payload))
			if r.storedPayload > 0 {
				parts = append(parts, fmt.Sprintf("payload stored %.0f B, WAL over it %.0f B", r.storedPayload, r.wal-r.storedPayload))
			}
		}
	}
	if len(res.calls) > 0 {
		perSecond := make([]string, len(t.healthy))
		for k := range t.healthy {
			perSecond[k] = fmt.Sprintf("%.0f", float64(res.calls[k])/res.elapsed.Seconds())
		}
		parts = append(parts, "healthy apps' calls/s "+strings.Join(perSecond, ", "))
		if t.failing != "" {
			parts = append(parts, fmt.Sprintf("failing app's calls/s %.0f", float64(res.calls[len(t.healthy)])/res.elapsed.Seconds()))
		}
	}
	if len(parts) > 0 {
		fmt.Printf("  %s: %s\n", t.name(), strings.Join(parts, " | "))
	}
}

// printDestComparisons prints, for each binary, its configurations of
// -destinations against one another, round by round and the median of
// the rounds' ratios: several destinations over one (CPU per event, WAL
// against its budget), a failing destination's twin over its healthy one
// (p99, the healthy apps' calls/s), and each binary over the first in the
// same configuration.
func printDestComparisons(targets []*target, rounds [][]receiverRound) {
	fmt.Println("destinations compared, round by round, then the median of the rounds' ratios:")
	index := func(pred func(t *target) bool) int { return slices.IndexFunc(targets, pred) }
	for j, t := range targets {
		if t.spec == nil {
			continue
		}
		s := *t.spec
		one := index(func(u *target) bool { return u.bin == t.bin && u.spec != nil && u.spec.count == 1 && !u.spec.failing })
		if !s.failing && s.count > 1 && one >= 0 {
			printSeveralOverOne(t, targets[one], rounds[j], rounds[one])
		}
		if s.ordered && !s.failing {
			unordered := index(func(u *target) bool {
				return u.bin == t.bin && u.spec != nil && *u.spec == destSpec{count: s.count, file: true}
			})
			if unordered >= 0 {
				printRatios(fmt.Sprintf("%s over %s", t.name(), targets[unordered].name()), rounds[j], rounds[unordered],
					[]ratioOf{{"events/s", func(r receiverRound) float64 { return r.events }},
						{"the least called app's calls/s", func(r receiverRound) float64 { return r.healthyCalls }},
						{"p99", func(r receiverRound) float64 { return ms(r.p99) }},
						{"hookd CPU per event", func(r receiverRound) float64 { return r.serverCPU }},
						{"postgres CPU per event", func(r receiverRound) float64 { return r.postgresCPU }},
						{"WAL per event", func(r receiverRound) float64 { return r.wal }}})
			}
		}
		if s.failing {
			healthy := *t.spec
			healthy.failing = false
			for _, twin := range []destSpec{healthy.healthyTwin(), healthy} {
				k := index(func(u *target) bool { return u.bin == t.bin && u.spec != nil && *u.spec == twin })
				printFailingOverHealthy(t, targets[k], rounds[j], rounds[k])
			}
		}
		first := index(func(u *target) bool { return u.spec != nil && *u.spec == s })
		if first != j {
			printRatios(fmt.Sprintf("%s over %s", t.name(), targets[first].name()), rounds[j], rounds[first],
				[]ratioOf{{"events/s", func(r receiverRound) float64 { return r.events }},
					{"p99", func(r receiverRound) float64 { return ms(r.p99) }},
					{"hookd CPU per event", func(r receiverRound) float64 { return r.serverCPU }},
					{"postgres CPU per event", func(r receiverRound) float64 { return r.postgresCPU }},
					{"WAL per event", func(r receiverRound) float64 { return r.wal }}})
		}
	}
}

type ratioOf struct {
	what string
	f    func(receiverRound) float64
}

// printRatios prints each figure of a over b's, each round's and their median.
func printRatios(label string, a, b []receiverRound, figures []ratioOf) {
	fmt.Printf("  %s:\n", label)
	for _, fig := range figures {
		var v []float64
		each := make([]string, len(a))
		for i := range a {
			x, y := fig.f(a[i]), fig.f(b[i])
			if x == 0 || y == 0 { // not measured (a WAL not counted)
				each[i] = "-"
				continue
			}
			v = append(v, x/y)
			each[i] = fmt.Sprintf("%.2f", x/y)
		}
		if len(v) == 0 {
			continue
		}
		fmt.Printf("    %s: %s; median %.2f\n", fig.what, strings.Join(each, ", "), median(v, func(x float64) float64 { return x }))
	}
}

// printSeveralOverOne compares t's N destinations with one's: CPU per event
// over one's, and WAL per event against the payload and N times one's
// delivery overhead (one's WAL per event over the payload it was sent).
func printSeveralOverOne(t, one *target, several, single []receiverRound) {
	printRatios(fmt.Sprintf("%s over %s", t.name(), one.name()), several, single,
		[]ratioOf{{"hookd CPU per event", func(r receiverRound) float64 { return r.serverCPU }},
			{"postgres CPU per event", func(r receiverRound) float64 { return r.postgresCPU }},
			{"hookd and postgres CPU per event", func(r receiverRound) float64 { return r.serverCPU + r.postgresCPU }},
			{"p99", func(r receiverRound) float64 { return ms(r.p99) }},
			{"events/s", func(r receiverRound) float64 { return r.events }}})
	n := float64(t.spec.count) / float64(one.spec.count)
	var walRatios, storedRatios []float64
	for i := range several {
		s, o := several[i], single[i]
		if s.walErr != nil || o.walErr != nil || s.wal == 0 || o.wal == 0 {
			continue
		}
		budget := s.payload + n*(o.wal-o.payload)
		walRatios = append(walRatios, s.wal/budget)
		fmt.Printf("    round %d: WAL per event %.0f B against payload sent %.0f B + %.0f × one's overhead %.0f B = %.0f B (%.2f of it); flushed commits per event %.3f (one: %.3f)\n",
			i+1, s.wal, s.payload, n, o.wal-o.payload, budget, s.wal/budget, s.commits, o.commits)
		if s.storedPayload > 0 && o.storedPayload > 0 {
			stored := s.storedPayload + n*(o.wal-o.storedPayload)
			storedRatios = append(storedRatios, s.wal/stored)
			fmt.Printf("    round %d: the same with the payload as stored: %.0f B + %.0f × %.0f B = %.0f B (%.2f of it)\n",
				i+1, s.storedPayload, n, o.wal-o.storedPayload, stored, s.wal/stored)
		}
	}
	if len(walRatios) > 0 {
		fmt.Printf("    WAL per event over its budget, median %.2f", median(walRatios, func(x float64) float64 { return x }))
		if len(storedRatios) > 0 {
			fmt.Printf("; with the payload as stored, median %.2f", median(storedRatios, func(x float64) float64 { return x }))
		}
		fmt.Println()
	}
}

// printFailingOverHealthy compares t, whose destinations include one that
// fails every call, with its twin whose destinations are all healthy.
func printFailingOverHealthy(t, healthy *target, failing, all []receiverRound) {
	printRatios(fmt.Sprintf("%s over %s", t.name(), healthy.name()), failing, all,
		[]ratioOf{{"p99", func(r receiverRound) float64 { return ms(r.p99) }},
			{"p50", func(r receiverRound) float64 { return ms(r.p50) }},
			{"the least called healthy app's calls/s", func(r receiverRound) float64 { return r.healthyCalls }},
			{"events/s", func(r receiverRound) float64 { return r.events }},
			{"hookd CPU per event", func(r receiverRound) float64 { return r.serverCPU }},
			{"postgres CPU per event", func(r receiverRound) float64 { return r.postgresCPU }},
			{"WAL per event", func(r receiverRound) float64 { return r.wal }}})
}

// cleanups undo a phase's set-up, the last added first (run).
type cleanups []func()

func (c *cleanups) add(f func()) { *c = append(*c, f) }

func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// tempDir makes a directory for a phase's files, and returns it with the
// phase's cleanups, the first of which removes it.
func tempDir(pattern string) (string, *cleanups, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return dir, &cleanups{func() { os.RemoveAll(dir) }}, nil
}
