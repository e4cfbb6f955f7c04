package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/providers/store"
)

// Tests of the money path found wanting by the review of issues 11, 13
// and 15 (each reproduced with the real binary first).

// TestDamagedLedgerRefusedAndRebuilt: a ledger cut short (a copy
// interrupted, a disk that filled) was refused with SQLite's "database
// disk image is malformed (11)" alone — no word of how to get out — and
// `ledger --rebuild` could not set it aside, so no command worked again
// until the user found the file. It is refused as an unreadable ledger
// (left as it is, the way out named), and --rebuild keeps it aside and
// re-creates the rows from the cloud.
func TestDamagedLedgerRefusedAndRebuilt(t *testing.T) {
	a := newAcme(t)
	a.search()
	if code, _, errOut := a.run("book", "acme-1", "--yes"); code != 0 {
		t.Fatalf("book: %s", errOut)
	}
	before := a.ledger()
	path := filepath.Join(a.dir, store.FileName)
	// A checkpointed file, as a backup copy of it would be.
	if code, _, errOut := a.run("ledger"); code != 0 {
		t.Fatalf("ledger: %s", errOut)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(path + ext)
	}
	cut := whole[:len(whole)/2]
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ledger"}, {"book", "acme-1", "--yes"}} {
		code, _, errOut := a.run(args...)
		if code != 1 || !strings.Contains(errOut, "damaged") || !strings.Contains(errOut, "ledger --rebuild") {
			t.Errorf("%v on a damaged ledger: exit %d: %s", args, code, errOut)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(cut) {
		t.Fatalf("the damaged ledger was changed: %v", err)
	}
	if a.fake.Calls("Book") != 1 {
		t.Fatal("bought again")
	}
	code, out, errOut := a.run("ledger", "--rebuild", "--provider", "acme", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 || rows[0]["id"] != before[0]["id"] || !strings.Contains(errOut, "kept aside") {
		t.Fatalf("rebuild: exit %d, rows %v: %s", code, rows, errOut)
	}
	// Its -wal and -shm go with it, under the same name.
	aside, _ := filepath.Glob(path + ".unreadable-*[0-9]Z")
	if len(aside) != 1 {
		t.Fatalf("the damaged ledger was not kept aside: %v", aside)
	}
	if got, err := os.ReadFile(aside[0]); err != nil || string(got) != string(cut) {
		t.Fatalf("what was kept aside is not the damaged file: %v", err)
	}
}
