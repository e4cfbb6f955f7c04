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
	sc := &traceScanner{br: bufio.NewReaderSize(in, 64<<10)}
	t, err := sc.trace()
	if err != nil {
		msg := err.Error()
		var f traceFault
		switch {
		case in.over:
			msg = fmt.Sprintf("larger than %d MiB", MaxTraceBytes>>20)
		case errors.As(err, &f):
		case errors.Is(err, errBadJSON) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			msg = "not a JSON object (" + msg + ")"
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

var errBadJSON = errors.New("bad JSON")

// traceScanner reads the one shape by hand: a JSON decoder is too slow.
type traceScanner struct {
	br  *bufio.Reader
	off int64
}

func (s *traceScanner) syntax(what string) error {
	return fmt.Errorf("%w: %s at byte %d", errBadJSON, what, s.off)
}

func (s *traceScanner) next() (byte, error) {
	c, err := s.br.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w at byte %d", io.ErrUnexpectedEOF, s.off)
		}
		return 0, err
	}
	s.off++
	return c, nil
}

// skipSpace returns the next byte that is not JSON white space.
func (s *traceScanner) skipSpace() (byte, error) {
	for {
		c, err := s.next()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

func (s *traceScanner) expect(want byte, what string) error {
	c, err := s.skipSpace()
	if err != nil {
		return err
	}
	if c != want {
		return s.syntax(fmt.Sprintf("%q where %s was expected", c, what))
	}
	return nil
}

func (s *traceScanner) trace() (Trace, error) {
	var t Trace
	c, err := s.skipSpace()
	if err != nil {
		return t, err
	}
	if c != '{' {
		return t, traceFault("not a JSON object")
	}
	seenMeta, seenData := false, false
	for first := true; ; first = false {
		c, err := s.skipSpace()
		if err != nil {
			return t, err
		}
		if c == '}' && first {
			break
		}
		if c != '"' {
			return t, s.syntax(fmt.Sprintf("%q where a key was expected", c))
		}
		raw, err := s.rawString()
		if err != nil {
			return t, err
		}
		var key string
		if json.Unmarshal(raw, &key) != nil {
			return t, s.syntax("a bad key")
		}
		if err := s.expect(':', "':'"); err != nil {
			return t, err
		}
		switch {
		case key == "metadata" && !seenMeta:
			seenMeta = true
			if t.GapSeconds, err = s.metadata(); err != nil {
				return t, err
			}
		case key == "data" && !seenData:
			seenData = true
			if t.Data, err = s.counts(); err != nil {
				return t, err
			}
		case key == "metadata" || key == "data":
			return t, traceFault(fmt.Sprintf("%q given twice", key))
		default:
			return t, traceFault(fmt.Sprintf("unknown key %q", key))
		}
		c, err = s.skipSpace()
		if err != nil {
			return t, err
		}
		if c == '}' {
			break
		}
		if c != ',' {
			return t, s.syntax(fmt.Sprintf("%q where ',' or '}' was expected", c))
		}
	}
	if c, err := s.skipSpace(); err == nil {
		return t, traceFault(fmt.Sprintf("more than one JSON value in the file (%q at byte %d)", c, s.off))
	} else if !errors.Is(err, io.ErrUnexpectedEOF) {
		return t, err
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
func (s *traceScanner) metadata() (int, error) {
	raw, err := s.rawValue()
	if err != nil {
		return 0, err
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil || meta == nil {
		return 0, traceFault(`"metadata" is not an object`)
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
func (s *traceScanner) counts() ([]int, error) {
	c, err := s.skipSpace()
	if err != nil {
		return nil, err
	}
	if c != '[' {
		_ = s.br.UnreadByte()
		s.off--
		return nil, traceFault(`"data" is not a list`)
	}
	var out []int
	var num []byte
	for {
		c, err := s.skipSpace()
		if err != nil {
			return nil, err
		}
		if c == ']' && len(out) == 0 {
			return out, nil
		}
		if len(out) == maxTraceTicks {
			return nil, traceFault(fmt.Sprintf(`"data" has more than %d ticks`, maxTraceTicks))
		}
		// A count: the run of bytes up to the next delimiter.
		num = append(num[:0], c)
		if c == '"' {
			raw, err := s.rawString()
			if err != nil {
				return nil, err
			}
			num = raw
		} else {
			for {
				b, err := s.br.ReadByte()
				if err != nil {
					break
				}
				if b == ',' || b == ']' || b == ' ' || b == '\t' || b == '\n' || b == '\r' {
					_ = s.br.UnreadByte()
					break
				}
				s.off++
				if len(num) < 64 {
					num = append(num, b)
				}
			}
		}
		n, ok := count(num)
		if !ok {
			return nil, traceFault(fmt.Sprintf("data[%d] %s is not a count", len(out), clip(string(num))))
		}
		out = append(out, n)
		c, err = s.skipSpace()
		if err != nil {
			return nil, err
		}
		if c == ']' {
			return out, nil
		}
		if c != ',' {
			return nil, s.syntax(fmt.Sprintf("%q where ',' or ']' was expected", c))
		}
	}
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

// rawString reads the rest of a string, quotes included.
func (s *traceScanner) rawString() ([]byte, error) {
	out := []byte{'"'}
	for {
		c, err := s.next()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		switch c {
		case '\\':
			c, err := s.next()
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		case '"':
			return out, nil
		}
	}
}

// rawValue reads one JSON value whole; json.Unmarshal checks it after.
func (s *traceScanner) rawValue() ([]byte, error) {
	c, err := s.skipSpace()
	if err != nil {
		return nil, err
	}
	var out []byte
	depth := 0
	for {
		switch c {
		case '"':
			raw, err := s.rawString()
			if err != nil {
				return nil, err
			}
			out = append(out, raw...)
		case '{', '[':
			depth++
			out = append(out, c)
		case '}', ']':
			depth--
			out = append(out, c)
		default:
			out = append(out, c)
		}
		if depth <= 0 {
			if depth < 0 || c == '}' || c == ']' || c == '"' {
				return out, nil
			}
			// A number or literal at the top: read to its end.
			b, err := s.br.ReadByte()
			if err != nil || b == ',' || b == '}' || b == ']' || b == ' ' || b == '\t' || b == '\n' || b == '\r' {
				if err == nil {
					_ = s.br.UnreadByte()
				}
				return out, nil
			}
			s.off++
			c = b
			continue
		}
		if c, err = s.next(); err != nil {
			return nil, err
		}
	}
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
