package tui

import (
	"runtime"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/feed"
)

// BenchmarkIdleSessions900 is what an idle SSH session costs: fifty
// sessions at 80×24 take a snapshot of 900 pools (a day of five-minute
// prices each) and draw their first frame; reported is the live heap they
// add, per session. "shared" is serve (one Shared per process), "private"
// a Shared per session, as every session derived its own rows before.
func BenchmarkIdleSessions900(b *testing.B) {
	snap := bigSnapshot(900)
	b.Run("shared", func(b *testing.B) { benchIdleSessions(b, snap, true) })
	b.Run("private", func(b *testing.B) { benchIdleSessions(b, snap, false) })
}

func benchIdleSessions(b *testing.B, snap *feed.Snapshot, share bool) {
	const n = 50
	var perSession float64
	for b.Loop() {
		before := liveHeap()
		// The process's rows count too, spread over its sessions.
		var sh *Shared
		if share {
			sh = NewShared()
		}
		ms := make([]*Model, n)
		for i := range ms {
			m := newBare(Options{Now: nowFn, Shared: sh})
			m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
			m.Update(snapshotMsg{snap: snap})
			_ = m.View()
			ms[i] = m
		}
		perSession = float64(int64(liveHeap())-int64(before)) / n
		runtime.KeepAlive(ms)
		runtime.KeepAlive(sh)
	}
	b.ReportMetric(perSession, "heap-B/session")
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return st.HeapAlloc
}
