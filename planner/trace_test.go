package planner

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The dataset's documented shape (skypilot-org/spot-traces README):
// {"metadata": {"gap_seconds": 300}, "data": [...]}, data[i] the instances
// available at tick i; its 16-node files count up to 16.
const datasetExample = `{"metadata": {"gap_seconds": 300}, "data": [0, 0, 5, 16, 16, 8, 0, 16]}`

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace("us-west-2a_v100_1.json", []byte(datasetExample))
	if err != nil {
		t.Fatal(err)
	}
	if tr.GapSeconds != 300 || !slices.Equal(tr.Data, []int{0, 0, 5, 16, 16, 8, 0, 16}) || tr.Hours() != 8*300.0/3600 {
		t.Fatalf("parsed %+v", tr)
	}
	// Other metadata keys are allowed; whitespace and a final newline too.
	if _, err := ParseTrace("f", []byte("{\"data\":[1],\n \"metadata\":{\"gap_seconds\":60,\"zone\":\"us-east-1a\"}}\n")); err != nil {
		t.Errorf("extra metadata refused: %v", err)
	}
	// The timeline of "at least n": up where data ≥ n.
	tl := tr.timeline(16)
	for _, c := range []struct {
		tick int
		up   bool
	}{{0, false}, {2, false}, {3, true}, {4, true}, {5, false}, {7, true}} {
		if up, _ := tl.at(float64(c.tick) * 300 / 3600); up != c.up {
			t.Errorf("tick %d: up %v, want %v", c.tick, up, c.up)
		}
		tl.rewindTo(0)
	}
	if up, _ := tl.at(tr.Hours() + 1); up {
		t.Error("up after the trace's end")
	}
}

func TestParseTraceErrors(t *testing.T) {
	cases := []struct {
		name, in, says string
	}{
		{"empty file", ``, "not a JSON object"},
		{"not JSON", `gap_seconds: 300`, "not a JSON object"},
		{"a list", `[1, 2]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"two values", `{"metadata": {"gap_seconds": 1}, "data": [1]} {}`, "more than one JSON value"},
		{"unknown key", `{"metadata": {"gap_seconds": 1}, "data": [1], "extra": 1}`, `unknown key "extra"`},
		{"no metadata", `{"data": [1]}`, `no "metadata"`},
		{"metadata not an object", `{"metadata": 5, "data": [1]}`, `"metadata" is not an object`},
		{"no gap", `{"metadata": {}, "data": [1]}`, "gap_seconds"},
		{"fractional gap", `{"metadata": {"gap_seconds": 1.5}, "data": [1]}`, "gap_seconds 1.5"},
		{"zero gap", `{"metadata": {"gap_seconds": 0}, "data": [1]}`, "gap_seconds 0"},
		{"gap as a string", `{"metadata": {"gap_seconds": "300"}, "data": [1]}`, "gap_seconds"},
		{"gap over a day", `{"metadata": {"gap_seconds": 86401}, "data": [1]}`, "86401"},
		{"no data", `{"metadata": {"gap_seconds": 1}}`, `no "data"`},
		{"data not a list", `{"metadata": {"gap_seconds": 1}, "data": {"a": 1}}`, `"data" is not a list`},
		{"empty data", `{"metadata": {"gap_seconds": 1}, "data": []}`, `"data" is empty`},
		{"negative count", `{"metadata": {"gap_seconds": 1}, "data": [1, -1]}`, "data[1] -1"},
		{"fractional count", `{"metadata": {"gap_seconds": 1}, "data": [0.5]}`, "data[0] 0.5"},
		{"exponent", `{"metadata": {"gap_seconds": 1}, "data": [1e3]}`, "data[0] 1e3"},
		{"null count", `{"metadata": {"gap_seconds": 1}, "data": [null]}`, "data[0] null"},
		{"huge count", `{"metadata": {"gap_seconds": 1}, "data": [99999999999999999999]}`, "data[0]"},
		{"truncated", `{"metadata": {"gap_seconds": 1}, "data": [1, 2`, "not a JSON object"},
	}
	for _, tc := range cases {
		_, err := ParseTrace("trace.json", []byte(tc.in))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "trace trace.json: ") || !strings.Contains(msg, tc.says) || !strings.Contains(msg, "want {") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line naming the file, saying %q and the accepted form", tc.name, msg, tc.says)
		}
	}
}

func TestTraceWriteRoundTrip(t *testing.T) {
	tr := Trace{Name: "x", GapSeconds: 195, Data: []int{0, 1, 1, 0, 16}}
	var b bytes.Buffer
	if err := tr.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), `{"metadata": {"gap_seconds": 195}, "data": [0, 1, 1, 0, 16]}`) {
		t.Errorf("written %q", b.String())
	}
	back, err := ParseTrace("x", b.Bytes())
	if err != nil || back.GapSeconds != tr.GapSeconds || !slices.Equal(back.Data, tr.Data) {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// FuzzParseTrace: no input panics; what parses writes back to the same.
func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{datasetExample, `{"metadata":{"gap_seconds":60},"data":[0]}`, `{}`, `[]`, `{"data":[1e400]}`,
		`{"metadata":{"gap_seconds":9223372036854775808},"data":[1]}`, "{\"metadata\":{\"gap_seconds\":1},\"data\":[1,\x00]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ParseTrace("fuzz", in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "trace fuzz: ") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if tr.GapSeconds < 1 || len(tr.Data) == 0 {
			t.Fatalf("accepted %+v", tr)
		}
		var b bytes.Buffer
		if err := tr.Write(&b); err != nil {
			t.Fatal(err)
		}
		back, err := ParseTrace("fuzz", b.Bytes())
		if err != nil || back.GapSeconds != tr.GapSeconds || !slices.Equal(back.Data, tr.Data) {
			t.Fatalf("round trip of %q: %v", in, err)
		}
		_ = tr.timeline(1)
	})
}

// endless is a trace that never ends: a head, then `unit` repeated, with
// a count of the bytes handed out.
type endless struct {
	head, unit string
	sent       int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if e.head != "" {
			c := copy(p[n:], e.head)
			e.head = e.head[c:]
			n += c
			continue
		}
		n += copy(p[n:], e.unit)
		if len(p)-n < len(e.unit) {
			break
		}
	}
	e.sent += int64(n)
	return n, nil
}

func TestReadTraceBounded(t *testing.T) {
	// Too many ticks: refused at the 2,000,001st, having read about that
	// much of the file and no more.
	ticks := &endless{head: `{"metadata": {"gap_seconds": 300}, "data": [1`, unit: ", 16"}
	_, err := ReadTrace("big.json", ticks)
	if err == nil || !strings.Contains(err.Error(), "more than 2000000 ticks") {
		t.Fatalf("an endless list: %v", err)
	}
	if ticks.sent > 9<<20 {
		t.Errorf("read %d bytes of an endless list before refusing it", ticks.sent)
	}
	// The limit itself: 2,000,000 ticks are a trace, one more is not.
	for _, n := range []int{maxTraceTicks, maxTraceTicks + 1} {
		in := `{"metadata": {"gap_seconds": 300}, "data": [1` + strings.Repeat(",1", n-1) + `]}`
		tr, err := ReadTrace("edge.json", strings.NewReader(in))
		if n == maxTraceTicks && (err != nil || len(tr.Data) != n) {
			t.Errorf("%d ticks: %v", n, err)
		}
		if n > maxTraceTicks && err == nil {
			t.Errorf("%d ticks accepted", n)
		}
	}
	// Too many bytes (whitespace, or a huge value in metadata): refused at
	// the byte limit, whatever the ticks.
	for _, unit := range []string{"          ", `aaaaaaaaaa`} {
		head := `{"metadata": {"gap_seconds": 300, "note": "`
		if unit[0] == ' ' {
			head = `{"metadata": {"gap_seconds": 300}, "data": [1,`
		}
		big := &endless{head: head, unit: unit}
		_, err := ReadTrace("big.json", big)
		if err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") || !strings.HasPrefix(err.Error(), "trace big.json: ") {
			t.Fatalf("an endless %q: %v", unit[:1], err)
		}
		if big.sent > MaxTraceBytes+64<<10 {
			t.Errorf("read %d bytes before refusing a file over %d", big.sent, MaxTraceBytes)
		}
	}
}

// BenchmarkReadTrace1M reads a trace of a million ticks as the dataset writes them.
func BenchmarkReadTrace1M(b *testing.B) {
	in := `{"metadata": {"gap_seconds": 300}, "data": [1` + strings.Repeat(", 16", 1_000_000-1) + `]}`
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ReadTrace("x", strings.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
