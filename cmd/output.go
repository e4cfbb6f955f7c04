package cmd

import (
	"bufio"
	"bytes"
	"cmp"
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

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatCSV   = "csv"
)

// localFormat is the table tag of a time shown in local time (app.LocalLayout).
const localFormat = "local"

// outputForm is the accepted form of -o, for error messages.
const outputForm = "table, json or csv"

// addOutputFlag adds -o/--output table|json|csv to the command, default
// table. root checks it (checkFlags).
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
// of the table; JSON and CSV keep every column and every digit. A time
// field tagged `table:"local"` is shown in the table in local time with
// its zone (as the TUI shows it); JSON and CSV keep RFC 3339 UTC. A field
// tagged `output:"table"` is for people only: the table shows it, and JSON
// and CSV (whose fields are DESIGN.md's contract) leave it out.
//
// Rows of a type whose columns package present declares (declared) are
// written through those columns instead.
func writeRows(w io.Writer, format string, rows any) error {
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Slice {
		return fmt.Errorf("writeRows: want a slice of structs, got %T", rows)
	}
	rw, err := newRowWriter(w, format, rv.Type().Elem())
	if err != nil {
		return err
	}
	if err := rw.write(rows); err != nil {
		return err
	}
	return rw.close()
}

// rowWriter writes rows of one struct type in several batches, so that a
// command with millions of rows (`history --window 90d`) need not hold them
// all: json and csv stream; a table is aligned, so it is held until close.
type rowWriter struct {
	format string
	typ    reflect.Type
	cols   []column
	buf    *bufio.Writer
	tw     *tabwriter.Writer
	csv    *csv.Writer
	keys   [][]byte // JSON object keys with their colon
	rec    []string
	n      int
}

// newRowWriter starts writing rows of type rowType (a struct) and writes
// the header.
func newRowWriter(w io.Writer, format string, rowType reflect.Type) (*rowWriter, error) {
	if err := checkOutput(format); err != nil {
		return nil, err
	}
	if rowType.Kind() != reflect.Struct {
		return nil, fmt.Errorf("rows of %s: want flat structs", rowType)
	}
	rw := &rowWriter{format: format, typ: rowType, buf: bufio.NewWriterSize(w, 64<<10)}
	var cols []column
	if d, ok := declared[rowType]; ok {
		cols = d()
	} else {
		cols = columnsOf(rowType)
	}
	for _, c := range cols {
		if format == formatTable && c.tableFmt == "-" || format != formatTable && c.tableOnly {
			continue
		}
		rw.cols = append(rw.cols, c)
	}
	rw.rec = make([]string, len(rw.cols))
	switch format {
	case formatJSON:
		rw.keys = make([][]byte, len(rw.cols))
		for j, c := range rw.cols {
			rw.keys[j] = append(strconv.AppendQuote(nil, c.name), ':') // names are plain ASCII
		}
		rw.buf.WriteString("[")
	case formatCSV:
		rw.csv = csv.NewWriter(rw.buf)
		for j, c := range rw.cols {
			rw.rec[j] = c.name
		}
		if err := rw.csv.Write(rw.rec); err != nil {
			return nil, err
		}
	default:
		rw.tw = tabwriter.NewWriter(rw.buf, 0, 0, 2, ' ', 0)
		for j, c := range rw.cols {
			rw.rec[j] = cmp.Or(c.head, strings.ToUpper(c.name))
		}
		fmt.Fprintln(rw.tw, strings.Join(rw.rec, "\t"))
	}
	return rw, nil
}

// write writes a batch: a slice of the row type.
func (rw *rowWriter) write(rows any) error {
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Slice || rv.Type().Elem() != rw.typ {
		return fmt.Errorf("rowWriter: want []%s, got %T", rw.typ, rows)
	}
	for i := 0; i < rv.Len(); i++ {
		r := rv.Index(i)
		var err error
		switch rw.format {
		case formatJSON:
			err = rw.jsonRow(r)
		case formatCSV:
			for j, c := range rw.cols {
				v, ok := cell(c.value(r))
				if !ok {
					rw.rec[j] = ""
					continue
				}
				rw.rec[j] = plain(v)
			}
			err = rw.csv.Write(rw.rec)
		default:
			for j, c := range rw.cols {
				if c.text != nil {
					rw.rec[j] = c.text(r)
					continue
				}
				rw.rec[j] = tableCell(c.value(r), c.tableFmt)
			}
			_, err = fmt.Fprintln(rw.tw, strings.Join(rw.rec, "\t"))
		}
		if err != nil {
			return err
		}
		rw.n++
	}
	return nil
}

// close ends the output and flushes it.
func (rw *rowWriter) close() error {
	switch rw.format {
	case formatJSON:
		if rw.n > 0 {
			rw.buf.WriteString("\n")
		}
		rw.buf.WriteString("]\n")
	case formatCSV:
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return err
		}
	default:
		if err := rw.tw.Flush(); err != nil {
			return err
		}
	}
	return rw.buf.Flush()
}

func (rw *rowWriter) jsonRow(r reflect.Value) error {
	b := rw.buf
	if rw.n > 0 {
		b.WriteString(",")
	}
	b.WriteString("\n  {")
	for j, c := range rw.cols {
		if j > 0 {
			b.WriteString(",")
		}
		b.Write(rw.keys[j])
		v, ok := cell(c.value(r))
		if !ok {
			b.WriteString("null")
			continue
		}
		if err := writeJSONValue(b, v); err != nil {
			return fmt.Errorf("encode %s: %w", c.name, err)
		}
	}
	b.WriteString("}")
	return nil
}

// column is one column of the output: its name (the JSON key, the CSV
// header, upper-cased in the table), its table format and how to read it
// from a row.
type column struct {
	name     string
	tableFmt string
	value    func(row reflect.Value) reflect.Value
	// tableOnly is set for a column only the table shows.
	tableOnly bool
	// head and text, when set, are the table's header and cell.
	head string
	text func(row reflect.Value) string
}

// declared are the columns package present declares once for the TUI and
// the CLI, by row type, read when a writer starts.
var declared = map[reflect.Type]func() []column{
	reflect.TypeFor[present.Row]():         func() []column { return fromPresent(present.MarketCols(present.Prices)) },
	reflect.TypeFor[present.LedgerRow]():   func() []column { return fromPresent(present.Ledger) },
	reflect.TypeFor[ledger.UsageRow]():     func() []column { return fromPresent(present.Usage) },
	reflect.TypeFor[present.OfferingRow](): func() []column { return fromPresent(present.Offerings) },
	reflect.TypeFor[present.PlanRow]():     func() []column { return fromPresent(present.Plan) },
	reflect.TypeFor[present.DayTotal]():    func() []column { return fromPresent(present.Days) },
	reflect.TypeFor[present.ActorTotal]():  func() []column { return fromPresent(present.Actors) },
}

// fromPresent reads rows of type E through columns declared in present.
func fromPresent[E any](cols []*present.Col[*E]) []column {
	out := make([]column, 0, len(cols))
	for _, c := range cols {
		if c.Field == "" {
			continue
		}
		col := column{name: c.Field, tableFmt: c.Format, tableOnly: c.TableOnly, head: c.Head, value: func(r reflect.Value) reflect.Value {
			return reflect.ValueOf(c.Value(r.Addr().Interface().(*E)))
		}}
		if c.Text != nil {
			col.text = func(r reflect.Value) string { return c.Text(r.Addr().Interface().(*E)) }
		}
		out = append(out, col)
	}
	return out
}

func columnsOf(t reflect.Type) []column {
	var cols []column
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			// An embedded struct's columns, in place.
			for _, c := range columnsOf(f.Type) {
				inner := c.value
				c.value = func(r reflect.Value) reflect.Value { return inner(r.Field(i)) }
				cols = append(cols, c)
			}
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		cols = append(cols, column{name: name, tableFmt: f.Tag.Get("table"), tableOnly: f.Tag.Get("output") == "table",
			value: func(r reflect.Value) reflect.Value { return r.Field(i) }})
	}
	return cols
}

// cell returns a field's value with pointers followed; ok is false for an
// unknown value.
func cell(v reflect.Value) (reflect.Value, bool) {
	if !v.IsValid() { // a declared column's nil
		return v, false
	}
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

// writeJSONValue writes a known value; the common kinds without reflection
// through encoding/json.
func writeJSONValue(b *bufio.Writer, v reflect.Value) error {
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if t.IsZero() {
			b.WriteString("null")
			return nil
		}
		var tb [40]byte
		b.WriteByte('"')
		b.Write(t.UTC().AppendFormat(tb[:0], time.RFC3339))
		b.WriteByte('"')
		return nil
	}
	var buf [32]byte
	switch v.Kind() {
	case reflect.String:
		if str := v.String(); plainJSONString(str) {
			b.WriteByte('"')
			b.WriteString(str)
			b.WriteByte('"')
			return nil
		}
	case reflect.Float64, reflect.Float32:
		b.Write(strconv.AppendFloat(buf[:0], v.Float(), 'f', -1, 64))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.Write(strconv.AppendInt(buf[:0], v.Int(), 10))
		return nil
	}
	enc, err := marshal(v.Interface())
	if err != nil {
		return err
	}
	b.Write(enc)
	return nil
}

// plainJSONString reports whether s can be written between quotes as it
// is: printable ASCII without quote or backslash (the rest goes through
// encoding/json).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// marshal is json.Marshal without HTML escaping, so "<5%" stays readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
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

// tableCell is a value for people: plain, or in the column's format or
// local time; "-" when unknown or empty.
func tableCell(f reflect.Value, format string) string {
	v, ok := cell(f)
	switch {
	case !ok:
		return "-"
	case v.Type() == timeType && format == localFormat && !v.Interface().(time.Time).IsZero():
		return v.Interface().(time.Time).Local().Format(app.LocalLayout)
	case v.Type() != timeType && format != "":
		return fmt.Sprintf(format, v.Interface())
	}
	return cmp.Or(plain(v), "-")
}
