package planner

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Trace is one pool's availability in the public spot-traces format:
// data[i] is how many instances the pool had at tick i.
type Trace struct {
	// Name says where the trace came from (its file), for messages.
	Name       string
	GapSeconds int
	Data       []int
}

// TraceForm is the accepted format, for error messages.
const TraceForm = `{"metadata": {"gap_seconds": N}, "data": [n0, n1, ...]} with N a whole number of seconds from 1 to 86400 and each n a whole number ≥ 0`

// Limits of a trace, checked as it streams.
const (
	maxGapSeconds = 86400
	maxTraceTicks = 2_000_000
	maxCount      = 1 << 30
	// MaxTraceBytes holds 2,000,000 ticks as the dataset writes them.
	MaxTraceBytes = 32 << 20
)

// ReadTrace reads a trace strictly as it streams (TraceForm), stopping at
// the first byte past a limit; errors name the file and the place.
func ReadTrace(name string, r io.Reader) (Trace, error) {
	in := &cappedReader{r: r, left: MaxTraceBytes}
	dec := json.NewDecoder(in)
	t, err := readTrace(dec)
	if err != nil {
		msg := err.Error()
		var f traceFault
		var syntax *json.SyntaxError
		switch {
		case in.over:
			msg = fmt.Sprintf("larger than %d MiB", MaxTraceBytes>>20)
		case errors.As(err, &f):
		case errors.As(err, &syntax) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			if errors.Is(err, io.EOF) {
				msg = io.ErrUnexpectedEOF.Error()
			}
			msg = fmt.Sprintf("not a JSON object (%s at byte %d)", msg, dec.InputOffset())
		default:
			return Trace{}, fmt.Errorf("trace %s: %w", name, err)
		}
		return Trace{}, fmt.Errorf("trace %s: %s; want %s", name, msg, TraceForm)
	}
	t.Name = name
	return t, nil
}

// traceFault is what is wrong with a trace's content.
type traceFault string

func (f traceFault) Error() string { return string(f) }

// readTrace reads the one object token by token, so the tick limit
// applies as the list streams, not after it was read whole.
func readTrace(dec *json.Decoder) (Trace, error) {
	var t Trace
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return t, cmp.Or(err, error(traceFault("not a JSON object")))
	}
	seenMeta, seenData := false, false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return t, err
		}
		switch key := tok.(string); {
		case key == "metadata" && !seenMeta:
			seenMeta = true
			if t.GapSeconds, err = metadata(dec); err != nil {
				return t, err
			}
		case key == "data" && !seenData:
			seenData = true
			if t.Data, err = counts(dec); err != nil {
				return t, err
			}
		case key == "metadata" || key == "data":
			return t, traceFault(fmt.Sprintf("%q given twice", key))
		default:
			return t, traceFault(fmt.Sprintf("unknown key %q", key))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return t, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return t, traceFault(fmt.Sprintf("more than one JSON value in the file (at byte %d)", dec.InputOffset()))
	}
	switch {
	case !seenMeta:
		return t, traceFault(`no "metadata"`)
	case t.GapSeconds == 0:
		return t, traceFault(`no "metadata.gap_seconds"`)
	case !seenData:
		return t, traceFault(`no "data"`)
	case len(t.Data) == 0:
		return t, traceFault(`"data" is empty`)
	}
	return t, nil
}

// metadata returns gap_seconds, 0 when there is none.
func metadata(dec *json.Decoder) (int, error) {
	var meta map[string]json.RawMessage
	if err := dec.Decode(&meta); err != nil || meta == nil {
		var typeErr *json.UnmarshalTypeError
		if err == nil || errors.As(err, &typeErr) {
			return 0, traceFault(`"metadata" is not an object`)
		}
		return 0, err
	}
	gapRaw, ok := meta["gap_seconds"]
	if !ok {
		return 0, nil
	}
	gap, ok := wholeNumber(gapRaw)
	if !ok || gap < 1 || gap > maxGapSeconds {
		return 0, traceFault(fmt.Sprintf("gap_seconds %s is not a whole number of seconds from 1 to %d", clip(string(gapRaw)), maxGapSeconds))
	}
	return int(gap), nil
}

// counts reads the data list, refusing it at its 2,000,001st tick.
func counts(dec *json.Decoder) ([]int, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, cmp.Or(err, error(traceFault(`"data" is not a list`)))
	}
	var out []int
	var raw json.RawMessage
	for dec.More() {
		if len(out) == maxTraceTicks {
			return nil, traceFault(fmt.Sprintf(`"data" has more than %d ticks`, maxTraceTicks))
		}
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		n, ok := count(raw)
		if !ok {
			return nil, traceFault(fmt.Sprintf("data[%d] %s is not a count", len(out), clip(string(raw))))
		}
		out = append(out, n)
	}
	_, err := dec.Token() // the closing bracket
	return out, err
}

// count reads a JSON whole number from 0 to maxCount.
func count(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 12 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= maxCount
}

// cappedReader reads at most `left` bytes and then fails, saying so.
type cappedReader struct {
	r    io.Reader
	left int64
	over bool
}

var errTraceTooBig = errors.New("trace too large")

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a file of exactly the limit from a bigger one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.over = true
			return 0, errTraceTooBig
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// wholeNumber reads a JSON number written as a whole number.
func wholeNumber(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
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

// timeline is when the trace has at least n instances.
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
