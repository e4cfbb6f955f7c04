package planner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Trace is one pool's recorded spot availability in the format of the
// public spot-traces dataset (skypilot-org/spot-traces, used by Can't Be
// Late): {"metadata": {"gap_seconds": N}, "data": [n0, n1, …]}, where
// data[i] is how many instances the pool had at tick i (0 = none).
type Trace struct {
	// Name says where the trace came from (its file), for messages.
	Name       string
	GapSeconds int
	Data       []int
}

// TraceForm is the accepted format, for error messages.
const TraceForm = `{"metadata": {"gap_seconds": N}, "data": [n0, n1, ...]} with N a whole number of seconds from 1 to 86400 and each n a whole number ≥ 0`

// Limits of a trace.
const (
	maxGapSeconds = 86400
	maxTraceTicks = 2_000_000
	maxCount      = 1 << 30
)

// ParseTrace reads a trace strictly: one JSON object with exactly the keys
// "metadata" and "data" (metadata may carry other keys, which are
// ignored), a whole positive gap_seconds, and a non-empty list of whole
// numbers ≥ 0. Errors name the file and the place.
func ParseTrace(name string, b []byte) (Trace, error) {
	t := Trace{Name: name}
	fail := func(format string, args ...any) (Trace, error) {
		return Trace{}, fmt.Errorf("trace %s: %s; want %s", name, fmt.Sprintf(format, args...), TraceForm)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return fail("not a JSON object (%s)", jsonErr(err))
	}
	if top == nil {
		return fail("not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail("more than one JSON value in the file")
	}
	for k := range top {
		if k != "metadata" && k != "data" {
			return fail("unknown key %q", k)
		}
	}
	metaRaw, ok := top["metadata"]
	if !ok {
		return fail(`no "metadata"`)
	}
	var meta map[string]json.RawMessage
	if err := unmarshalNumbers(metaRaw, &meta); err != nil || meta == nil {
		return fail(`"metadata" is not an object`)
	}
	gapRaw, ok := meta["gap_seconds"]
	if !ok {
		return fail(`no "metadata.gap_seconds"`)
	}
	gap, ok := wholeNumber(gapRaw)
	if !ok || gap < 1 || gap > maxGapSeconds {
		return fail("gap_seconds %s is not a whole number of seconds from 1 to %d", clip(string(gapRaw)), maxGapSeconds)
	}
	t.GapSeconds = int(gap)
	dataRaw, ok := top["data"]
	if !ok {
		return fail(`no "data"`)
	}
	var data []json.RawMessage
	if err := unmarshalNumbers(dataRaw, &data); err != nil {
		return fail(`"data" is not a list`)
	}
	if len(data) == 0 {
		return fail(`"data" is empty`)
	}
	if len(data) > maxTraceTicks {
		return fail(`"data" has %d ticks, more than %d`, len(data), maxTraceTicks)
	}
	t.Data = make([]int, len(data))
	for i, raw := range data {
		n, ok := wholeNumber(raw)
		if !ok || n < 0 || n > maxCount {
			return fail("data[%d] %s is not a count", i, clip(string(raw)))
		}
		t.Data[i] = int(n)
	}
	return t, nil
}

func unmarshalNumbers(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// wholeNumber reads a JSON number written as a whole number (no fraction
// or exponent: counts and seconds are written so).
func wholeNumber(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	return err.Error()
}

func clip(s string) string {
	if len(s) > 24 {
		return s[:21] + "..."
	}
	return s
}

// Write writes the trace in the dataset's format.
func (t Trace) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `{"metadata": {"gap_seconds": %d}, "data": [`, t.GapSeconds)
	for i, n := range t.Data {
		if i > 0 {
			bw.WriteString(", ")
		}
		bw.WriteString(strconv.Itoa(n))
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// Hours is the trace's length.
func (t Trace) Hours() float64 { return float64(len(t.Data)) * float64(t.GapSeconds) / 3600 }

// timeline is when the trace has at least n instances, in hours from its
// start, closed at its end.
func (t Trace) timeline(n int) *timeline {
	tl := &timeline{up0: t.Data[0] >= n}
	gap := float64(t.GapSeconds) / 3600
	up := tl.up0
	for i, v := range t.Data {
		if now := v >= n; now != up {
			tl.bounds = append(tl.bounds, float64(i)*gap)
			up = now
		}
	}
	tl.closeAt(t.Hours())
	return tl
}
