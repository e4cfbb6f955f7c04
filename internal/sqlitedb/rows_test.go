package sqlitedb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A query that fails on its third row: SQLite raises "integer overflow" from
// abs() of the least integer when it steps there, after two rows were read.
func TestEachRowSaysAFailureMidway(t *testing.T) {
	d := mustOpen(t, filepath.Join(t.TempDir(), "n.db"), notes(true))
	for _, b := range []string{"a", "b", "c"} {
		if _, err := d.Exec(`INSERT INTO notes (body) VALUES (?)`, b); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	rows, err := d.Query(`SELECT CASE WHEN id = 3 THEN abs(-9223372036854775808) ELSE body END FROM notes ORDER BY id`)
	err = EachRow(rows, err, func() error {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		got = append(got, s)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("EachRow over a query failing at row 3 = %v after %q; want the overflow", err, got)
	}
	if len(got) != 2 {
		t.Fatalf("rows read before the failure: %q, want a and b", got)
	}
}

// All reads the rows in the query's order, and gives nothing but the error
// of a query that fails midway: a partial list is never taken for the whole.
func TestAllReadsEveryRowOrNone(t *testing.T) {
	d := mustOpen(t, filepath.Join(t.TempDir(), "n.db"), notes(true))
	for _, b := range []string{"a", "b", "c"} {
		if _, err := d.Exec(`INSERT INTO notes (body) VALUES (?)`, b); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	got, err := All(ctx, d.DB, String, `SELECT body FROM notes ORDER BY id DESC`)
	if err != nil || strings.Join(got, ",") != "c,b,a" {
		t.Fatalf("All = %q, %v; want c,b,a", got, err)
	}
	got, err = All(ctx, d.DB, String, `SELECT CASE WHEN id = 3 THEN abs(-9223372036854775808) ELSE body END FROM notes ORDER BY id`)
	if err == nil || got != nil {
		t.Fatalf("All over a query failing at row 3 = %q, %v; want no rows and the error", got, err)
	}
}

func TestInListsEveryValue(t *testing.T) {
	if ph, args := In([]string{"a", "b", "c"}); ph != "?,?,?" || len(args) != 3 || args[2] != "c" {
		t.Fatalf("In(a, b, c) = %q %v", ph, args)
	}
	if ph, args := In([]int{}); ph != "" || len(args) != 0 {
		t.Fatalf("In() = %q %v", ph, args)
	}
}
