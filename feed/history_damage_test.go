package feed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// damagedCache makes a cache of 40 pools' 10 days and overwrites its
// pages from page `from` on (1-based; 4 KiB pages), as a bad sector or a
// copy cut short would.
func damagedCache(t *testing.T, from int) string {
	t.Helper()
	dir := t.TempDir()
	c := open(t, dir, HistoryOptions{})
	var runs []Run
	for i := 0; i < 40; i++ {
		runs = append(runs, hourly(keyOf("r1", "r1a", string(rune('a'+i))+".xlarge"), t0, t0.Add(10*24*time.Hour), 1))
	}
	c.Save(Batch{Provider: "aws", Runs: runs, Spans: []Span{{Region: "r1", From: t0, Until: t0.Add(10 * 24 * time.Hour)}}})
	mustFlush(t, c)
	var pages int
	c.db.QueryRow(`PRAGMA page_count`).Scan(&pages)
	c.Close()
	if pages < from+5 {
		t.Fatalf("the cache has %d pages only", pages)
	}
	f, err := os.OpenFile(Path(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	for p := from; p <= pages; p++ {
		if _, err := f.WriteAt(junk, int64(p-1)*4096); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A file whose chunk pages were overwritten still opens (its schema is
// whole): SQLite finds the damage when the history is read. Load fails,
// nothing more is written, the file is moved aside at Close, and the next
// start is fresh.
func TestDamagedPagesMovedAsideAtClose(t *testing.T) {
	dir := damagedCache(t, 12) // the schema's pages (1-9) and the first leaves stay
	c := open(t, dir, HistoryOptions{})
	if c.Aside() != nil {
		t.Fatalf("moved aside at Open: %v", c.Aside().Reason)
	}
	if _, err := c.Load(context.Background(), "aws", domain.Query{}, t0, t0.Add(10*24*time.Hour)); err == nil {
		t.Fatal("Load of a damaged file succeeded")
	}
	c.Close()
	if m, _ := filepath.Glob(Path(dir) + ".corrupt-*"); len(m) != 1 {
		t.Fatalf("moved aside: %v", m)
	}
	c = open(t, dir, HistoryOptions{})
	if got, err := c.Load(context.Background(), "aws", domain.Query{}, t0, t0.Add(48*time.Hour)); err != nil || len(got.Spans) != 0 {
		t.Fatalf("the next start: %+v, %v; want a fresh cache", got, err)
	}
}

// A file whose tables' pages were overwritten is found damaged at Open
// and moved aside then, saying SQLite cannot read it.
func TestDamagedSchemaMovedAsideAtOpen(t *testing.T) {
	dir := damagedCache(t, 3) // all but the file header and its map
	c := open(t, dir, HistoryOptions{})
	a := c.Aside()
	if a == nil || !strings.Contains(a.Reason.Error(), "SQLite cannot read it") {
		t.Fatalf("aside = %+v", a)
	}
}
