package cmd

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatCSV   = "csv"
)

// outputForm is the accepted form of -o, for error messages.
const outputForm = "table, json or csv"

// addOutputFlag adds -o/--output table|json|csv to the command, default
// table. Check it with checkOutput (setup does not know the command's flags).
func addOutputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", formatTable, "output format: "+outputForm)
}

// checkOutput refuses a bad -o value with a usage error.
func checkOutput(format string) error {
	switch format {
	case formatTable, formatJSON, formatCSV:
		return nil
	}
	return usagef("-o %q: want %s", format, outputForm)
}

// writeRows writes rows, a slice of flat structs, in the format. The
// columns are the fields with a json tag, in order, named by the tag.
// Pointers that are nil, and NaN floats, are unknown values: null in JSON,
// empty in CSV, "-" in a table. Times are RFC 3339 UTC. A field may carry a
// `table:"%.2f"` tag to round it for people, or `table:"-"` to leave it out
// of the table; JSON and CSV keep every column and every digit.
func writeRows(w io.Writer, format string, rows any) error {
	if err := checkOutput(format); err != nil {
		return err
	}
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Slice {
		return fmt.Errorf("writeRows: want a slice of structs, got %T", rows)
	}
	et := rv.Type().Elem()
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	if et.Kind() != reflect.Struct {
		return fmt.Errorf("writeRows: want a slice of structs, got %T", rows)
	}
	cols := columnsOf(et)
	switch format {
	case formatJSON:
		return writeJSON(w, rv, cols)
	case formatCSV:
		return writeCSV(w, rv, cols)
	default:
		return writeTable(w, rv, cols)
	}
}

type column struct {
	name     string
	index    int
	tableFmt string
}

func columnsOf(t reflect.Type) []column {
	var cols []column
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		cols = append(cols, column{name: name, index: i, tableFmt: f.Tag.Get("table")})
	}
	return cols
}

func rowAt(rv reflect.Value, i int) reflect.Value {
	r := rv.Index(i)
	for r.Kind() == reflect.Pointer {
		r = r.Elem()
	}
	return r
}

// cell returns a field's value with pointers followed; ok is false for an
// unknown value.
func cell(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	if (v.Kind() == reflect.Float64 || v.Kind() == reflect.Float32) && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
		return v, false
	}
	return v, true
}

var timeType = reflect.TypeFor[time.Time]()

func writeJSON(w io.Writer, rv reflect.Value, cols []column) error {
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < rv.Len(); i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		r := rowAt(rv, i)
		for j, c := range cols {
			if j > 0 {
				b.WriteString(",")
			}
			k, _ := json.Marshal(c.name)
			b.Write(k)
			b.WriteString(":")
			v, ok := cell(r.Field(c.index))
			if !ok {
				b.WriteString("null")
				continue
			}
			var val any = v.Interface()
			if v.Type() == timeType {
				t := v.Interface().(time.Time)
				if t.IsZero() {
					b.WriteString("null")
					continue
				}
				val = t.UTC().Format(time.RFC3339)
			}
			enc, err := json.Marshal(val)
			if err != nil {
				return fmt.Errorf("encode %s: %w", c.name, err)
			}
			b.Write(enc)
		}
		b.WriteString("}")
	}
	if rv.Len() > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// plain renders a known value for CSV: every digit, times RFC 3339 UTC.
func plain(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'f', -1, 64)
	case reflect.String:
		return v.String()
	}
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	return fmt.Sprint(v.Interface())
}

func writeCSV(w io.Writer, rv reflect.Value, cols []column) error {
	cw := csv.NewWriter(w)
	rec := make([]string, len(cols))
	for j, c := range cols {
		rec[j] = c.name
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	for i := 0; i < rv.Len(); i++ {
		r := rowAt(rv, i)
		for j, c := range cols {
			v, ok := cell(r.Field(c.index))
			if !ok {
				rec[j] = ""
				continue
			}
			rec[j] = plain(v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeTable(w io.Writer, rv reflect.Value, all []column) error {
	var cols []column
	for _, c := range all {
		if c.tableFmt != "-" {
			cols = append(cols, c)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	names := make([]string, len(cols))
	for j, c := range cols {
		names[j] = strings.ToUpper(c.name)
	}
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	cells := make([]string, len(cols))
	for i := 0; i < rv.Len(); i++ {
		r := rowAt(rv, i)
		for j, c := range cols {
			v, ok := cell(r.Field(c.index))
			switch {
			case !ok:
				cells[j] = "-"
			case v.Type() == timeType:
				t := v.Interface().(time.Time)
				if t.IsZero() {
					cells[j] = "-"
				} else {
					cells[j] = t.UTC().Format(time.RFC3339)
				}
			case c.tableFmt != "":
				cells[j] = fmt.Sprintf(c.tableFmt, v.Interface())
			case v.Kind() == reflect.Float64 || v.Kind() == reflect.Float32:
				cells[j] = strconv.FormatFloat(v.Float(), 'f', -1, 64)
			case v.Kind() == reflect.String && v.String() == "":
				cells[j] = "-"
			default:
				cells[j] = fmt.Sprint(v.Interface())
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
