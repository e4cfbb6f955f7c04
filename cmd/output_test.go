package cmd

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

type outRow struct {
	Name  string    `json:"name"`
	Price *float64  `json:"price" table:"%.2f"`
	Count int       `json:"count"`
	Note  *string   `json:"note"`
	At    time.Time `json:"at"`
	Ratio float64   `json:"ratio"`
	Quiet string    `json:"quiet" table:"-"`
	// skip is unexported: no output writes it (the key count below).
	skip string
}

func outRows() []outRow {
	p := 1.23456
	n := "a,b"
	return []outRow{
		{Name: "x", Price: &p, Count: 2, Note: &n, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)), Ratio: 0.5, Quiet: "q", skip: "s"},
		{Name: "y", Count: 3, Ratio: math.NaN()},
	}
}

func TestWriteRowsJSON(t *testing.T) {
	var b bytes.Buffer
	if err := writeRows(&b, "json", outRows()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	if len(got) != 2 {
		t.Fatalf("got %d rows", len(got))
	}
	want := []string{"name", "price", "count", "note", "at", "ratio", "quiet"}
	for _, row := range got {
		if len(row) != len(want) {
			t.Errorf("row has keys %v, want %v", row, want)
		}
		for _, k := range want {
			if _, ok := row[k]; !ok {
				t.Errorf("row lacks %q: %v", k, row)
			}
		}
	}
	if got[0]["at"] != "2026-01-02T02:04:05Z" {
		t.Errorf("at = %v, want RFC 3339 UTC", got[0]["at"])
	}
	if got[0]["price"] != 1.23456 {
		t.Errorf("price = %v, want every digit in JSON", got[0]["price"])
	}
	for _, k := range []string{"price", "note", "at", "ratio"} {
		if got[1][k] != nil {
			t.Errorf("row 2 %s = %v, want null", k, got[1][k])
		}
	}
}

func TestWriteRowsEmptyJSONIsArray(t *testing.T) {
	var b bytes.Buffer
	if err := writeRows(&b, "json", []outRow{}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("got %q, want []", b.String())
	}
}

func TestWriteRowsCSV(t *testing.T) {
	var b bytes.Buffer
	if err := writeRows(&b, "csv", outRows()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(recs[0], ","); h != "name,price,count,note,at,ratio,quiet" {
		t.Errorf("header = %s", h)
	}
	if r := recs[1]; r[1] != "1.23456" || r[3] != "a,b" || r[4] != "2026-01-02T02:04:05Z" {
		t.Errorf("row 1 = %q", r)
	}
	if r := recs[2]; r[1] != "" || r[3] != "" || r[4] != "" || r[5] != "" {
		t.Errorf("row 2 = %q, want empty unknowns", r)
	}
}

func TestWriteRowsTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeRows(&b, "table", outRows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME PRICE COUNT NOTE AT RATIO" {
		t.Errorf("header = %q", lines[0])
	}
	if f := strings.Fields(lines[1]); f[1] != "1.23" {
		t.Errorf("price cell = %q, want the table format", f[1])
	}
	if f := strings.Fields(lines[2]); f[1] != "-" || f[3] != "-" || f[4] != "-" || f[5] != "-" {
		t.Errorf("row 2 = %q, want - for unknowns", lines[2])
	}
	// aligned: every column starts at the same offset on every line
	if strings.Index(lines[0], "COUNT") != strings.Index(lines[2], "3") {
		t.Errorf("columns not aligned:\n%s", b.String())
	}
}

func TestWriteRowsRejects(t *testing.T) {
	var b bytes.Buffer
	if err := writeRows(&b, "yaml", outRows()); err == nil || !strings.Contains(err.Error(), "-o") {
		t.Errorf("format yaml: err = %v, want a usage error naming -o", err)
	}
	if err := writeRows(&b, "json", 3); err == nil {
		t.Error("writeRows(3) succeeded")
	}
}
