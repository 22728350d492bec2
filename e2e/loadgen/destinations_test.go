package main

import (
	"bufio"
	"strings"
	"testing"
)

// -destinations reads counts: 1 is the one-app path, 1f and N a file; with
// -failing-destination each file configuration has a failing twin and a
// healthy one with as many destinations, listed once.
func TestParseDestinations(t *testing.T) {
	t.Parallel()
	got, err := parseDestinations("1, 1f,3,2", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []destSpec{{count: 1}, {count: 1, file: true}, {count: 1, file: true, failing: true}, {count: 2, file: true},
		{count: 3, file: true}, {count: 3, file: true, failing: true}, {count: 4, file: true},
		{count: 2, file: true, failing: true}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("configuration %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"0", "x", "", "2g"} {
		if _, err := parseDestinations(bad, false); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := parseDestinations("1", true); err == nil {
		t.Error("a failing destination without a file configuration: no error")
	}
}

// countWAL keeps the transactions that touched the database, whole, with
// their commit records, and the records of no transaction that name one of
// its relations; others' transactions and a lease-only commit are left out.
func TestCountWAL(t *testing.T) {
	t.Parallel()
	dump := `rmgr: Heap        len (rec/tot):     59/  1200, tx:        734, lsn: 0/01A3B2C8, prev 0/01A3B290, desc: INSERT off 3 flags 0x00, blkref #0: rel 1663/16384/16385 blk 0 FPW
rmgr: Btree       len (rec/tot):     64/    64, tx:        734, lsn: 0/01A3B300, prev 0/01A3B2C8, desc: INSERT_LEAF off 2, blkref #0: rel 1663/16384/16390 blk 1
rmgr: Transaction len (rec/tot):     34/    34, tx:        734, lsn: 0/01A3B340, prev 0/01A3B300, desc: COMMIT 2026-12-06 06:00:00.000000 UTC
rmgr: Heap        len (rec/tot):     59/    59, tx:        735, lsn: 0/01A3B368, prev 0/01A3B340, desc: INSERT off 4 flags 0x00, blkref #0: rel 1663/5/16385 blk 0
rmgr: Transaction len (rec/tot):     34/    34, tx:        735, lsn: 0/01A3B3A8, prev 0/01A3B368, desc: COMMIT 2026-12-06 06:00:00.000001 UTC
rmgr: Transaction len (rec/tot):     34/    34, tx:        736, lsn: 0/01A3B3D0, prev 0/01A3B3A8, desc: COMMIT 2026-12-06 06:00:00.000002 UTC
rmgr: Heap2       len (rec/tot):     56/    56, tx:          0, lsn: 0/01A3B3F8, prev 0/01A3B3D0, desc: PRUNE latestRemovedXid 730 nredirected 0 ndead 1, blkref #0: rel 1663/16384/16385 blk 0
rmgr: Standby     len (rec/tot):     50/    50, tx:          0, lsn: 0/01A3B430, prev 0/01A3B3F8, desc: RUNNING_XACTS nextXid 737
`
	got := countWAL(bufio.NewScanner(strings.NewReader(dump)), "16384")
	if got.err != nil {
		t.Fatal(got.err)
	}
	if want := (walCount{bytes: 1200 + 64 + 34 + 56, records: 4, commits: 1}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
