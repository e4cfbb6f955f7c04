package sqlitedb

import (
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
