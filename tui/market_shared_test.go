package tui

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
)

// sharedSession is a session of a process whose Shared is sh, on snap.
func sharedSession(t testing.TB, sh *Shared, snap *feed.Snapshot, opt Options) *Model {
	t.Helper()
	opt.Now, opt.NoColor, opt.Shared = nowFn, true, sh
	m := newBare(opt)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(snapshotMsg{snap: snap})
	return m
}

func screenOf(m *Model) string { return ansi.Strip(m.View().Content) }

// repriced is snap one tick later, with pool i's price multiplied by f.
func repriced(snap *feed.Snapshot, i int, f float64) *feed.Snapshot {
	s := *snap
	s.Seq++
	s.Pools = append(s.Pools[:0:0], snap.Pools...)
	pv := &s.Pools[i]
	at, usd, _ := pv.History.Last()
	pv.History = pv.History.Merge([]int64{at + 60}, []float64{usd * f})
	pv.Changed = s.Seq
	return &s
}

func TestSessionsShareTheMarketRows(t *testing.T) {
	sh, snap := NewShared(), fixtureSnapshot()
	a := sharedSession(t, sh, snap, Options{})
	b := sharedSession(t, sh, snap, Options{})
	if a.market.rs != b.market.rs || unsafe.SliceData(a.market.rs.rows) != unsafe.SliceData(b.market.rs.rows) {
		t.Fatal("two sessions on one snapshot derived their rows each")
	}
	if len(a.market.rs.rows) != len(snap.Pools) {
		t.Fatalf("%d rows of %d pools", len(a.market.rs.rows), len(snap.Pools))
	}
	before := screenOf(b)
	press(a, "/", "H", "1", "0", "0")
	press(a, "enter")
	press(a, "s", "s", "S", "space")
	if len(a.market.list) != 3 || a.market.sortBy != 2 || !a.market.reverse || len(a.market.marked) != 1 {
		t.Fatalf("session a: %d rows, sort %d reverse %v, %d marked", len(a.market.list), a.market.sortBy, a.market.reverse, len(a.market.marked))
	}
	if got := screenOf(b); got != before {
		t.Errorf("session a's filter, sort and mark changed session b's view:\n%s\nwas\n%s", got, before)
	}
	if len(b.market.list) != len(snap.Pools) || a.market.rs != b.market.rs {
		t.Error("session a's filter changed the shared rows")
	}
	for i, r := range a.market.rs.rows {
		if r.Key != snap.Pools[i].Key {
			t.Fatalf("shared row %d is %s, pool %s", i, r.Key, snap.Pools[i].Key)
		}
	}

	// Another job's EFF is other figures: not the same rows.
	c := sharedSession(t, sh, snap, Options{Effective: planner.Basis{GPUs: 1, Hours: 2}})
	if c.market.rs == a.market.rs {
		t.Error("a session pricing another job shares the rows of the default job")
	}
}

// A tick derives only the pool that changed, once for every session, and
// each session shows what a session started on the new snapshot shows.
func TestSharedRowsFollowATick(t *testing.T) {
	sh, snap := NewShared(), fixtureSnapshot()
	a := sharedSession(t, sh, snap, Options{})
	b := sharedSession(t, sh, snap, Options{})
	keys := []string{"s", "S", "r", "down", "down"}
	press(b, keys...)
	old := a.market.rs
	next := repriced(snap, 0, 0.01) // from wherever it was to the cheapest
	a.Update(snapshotMsg{snap: next})
	b.Update(snapshotMsg{snap: next})
	rs := a.market.rs
	if rs == old || b.market.rs != rs {
		t.Fatal("the sessions do not share the new snapshot's rows")
	}
	if len(rs.changed) != 1 || rs.rows[0] == old.rows[0] {
		t.Fatalf("rows derived again %v, want only pool 0's", rs.changed)
	}
	for i := 1; i < len(rs.rows); i++ {
		if rs.rows[i] != old.rows[i] {
			t.Fatalf("unchanged pool %d derived again", i)
		}
	}
	for _, tc := range []struct {
		m    *Model
		keys []string
	}{{a, nil}, {b, keys}} {
		fresh := sharedSession(t, NewShared(), next, Options{})
		press(fresh, tc.keys...)
		// The cursor stays on its pool across a tick; on a fresh session
		// it starts at the top: compare from the same pool.
		for fresh.market.cursorKey != tc.m.market.cursorKey && fresh.market.cursor < len(fresh.market.list)-1 {
			press(fresh, "down")
		}
		if got, want := screenOf(tc.m), screenOf(fresh); got != want {
			t.Errorf("after the tick, keys %v:\n%s\nwant\n%s", tc.keys, got, want)
		}
	}
}

// Sessions draw shared rows at once, each in its own goroutine as over
// SSH: run with -race.
func TestSessionsDrawSharedRowsConcurrently(t *testing.T) {
	sh, snap := NewShared(), bigSnapshot(300)
	snaps := []*feed.Snapshot{snap, repriced(snap, 7, 1.5), repriced(snap, 9, 0.5)}
	var wg sync.WaitGroup
	for s := range 4 {
		m := sharedSession(t, sh, snap, Options{Window: time.Duration(1+s%2) * time.Hour})
		wg.Go(func() {
			for i := range 30 {
				m.Update(snapshotMsg{snap: snaps[i%len(snaps)]})
				press(m, "pgdown")
				if s == 0 && i%10 == 0 {
					press(m, "w")
				}
				_ = m.View()
			}
		})
	}
	wg.Wait()
}

// The cache holds the newest rows of each window in use, not every
// snapshot's: a window no session moved on is let go, and its session
// still follows the market from the rows it has.
func TestSharedKeepsOnlyTheLatestRows(t *testing.T) {
	sh, snap := NewShared(), fixtureSnapshot()
	a := sharedSession(t, sh, snap, Options{Window: time.Hour})
	b := sharedSession(t, sh, snap, Options{Window: 6 * time.Hour})
	if len(sh.latest) != 2 {
		t.Fatalf("%d kinds of rows cached, want 2", len(sh.latest))
	}
	s := snap
	for i := range 5 {
		s = repriced(s, i%len(s.Pools), 1.1)
		a.Update(snapshotMsg{snap: s})
	}
	if len(sh.latest) != 1 || sh.latest[a.market.rs.kind] != a.market.rs {
		t.Fatalf("cached %d kinds after five snapshots only the 1h session took", len(sh.latest))
	}
	b.Update(snapshotMsg{snap: s})
	fresh := sharedSession(t, NewShared(), s, Options{Window: 6 * time.Hour})
	if got, want := screenOf(b), screenOf(fresh); got != want {
		t.Errorf("the 6h session after its rows were let go:\n%s\nwant\n%s", got, want)
	}
}
