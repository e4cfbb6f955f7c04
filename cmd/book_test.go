package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// offeringsFields and ledgerFields are DESIGN.md's contract, in order.
var offeringsFields = []string{"id", "provider", "cloud", "region", "zone", "instance_type", "gpu_model", "gpu_count",
	"instance_count", "start", "end", "duration_hours", "upfront_usd", "currency", "usd_gpu_hour", "kind", "segments"}

var ledgerFields = []string{"id", "kind", "provider", "cloud", "region", "zone", "instance_type", "instance_count",
	"gpu_count", "start", "end", "committed_usd", "cost_so_far_usd", "cost_usd", "state", "provider_ref", "actor", "created_at", "error"}

// session runs several command lines against one data dir (and config),
// as a user does in one shell.
type session struct {
	t *testing.T
}

func newSession(t *testing.T, configYAML string) *session {
	t.Helper()
	isolate(t)
	dir := t.TempDir()
	t.Setenv("GPUMARKET_DATA_DIR", filepath.Join(dir, "data"))
	if configYAML != "" {
		p := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(p, []byte(configYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("GPUMARKET_CONFIG", p)
	}
	return &session{t: t}
}

func (s *session) run(args ...string) (int, string, string) {
	s.t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// jsonRows decodes a JSON array of objects, keeping each object's keys in
// order.
func jsonRows(t *testing.T, s string) ([]map[string]any, [][]string) {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(s), &rows); err != nil {
		t.Fatalf("not a JSON array of objects: %v\n%s", err, s)
	}
	var raw []json.RawMessage
	json.Unmarshal([]byte(s), &raw)
	var keys [][]string
	for _, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.Token()
		var ks []string
		for dec.More() {
			k, _ := dec.Token()
			ks = append(ks, k.(string))
			var v json.RawMessage
			dec.Decode(&v)
		}
		keys = append(keys, ks)
	}
	return rows, keys
}

func (s *session) search() []map[string]any {
	s.t.Helper()
	code, out, errOut := s.run("offerings", "--gpu", "H100", "--count", "1", "--duration", "48h", "--kind", "block", "-o", "json")
	if code != 0 {
		s.t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
	rows, keys := jsonRows(s.t, out)
	if len(rows) == 0 {
		s.t.Fatal("the simulated market offered nothing")
	}
	for _, k := range keys {
		if !slices.Equal(k, offeringsFields) {
			s.t.Fatalf("offering fields %v, want %v", k, offeringsFields)
		}
	}
	return rows
}

func (s *session) ledger() ([]map[string]any, string) {
	s.t.Helper()
	code, out, errOut := s.run("ledger", "-o", "json")
	if code != 0 {
		s.t.Fatalf("ledger: exit %d: %s", code, errOut)
	}
	rows, keys := jsonRows(s.t, out)
	for _, k := range keys {
		if !slices.Equal(k, ledgerFields) {
			s.t.Fatalf("ledger fields %v, want %v", k, ledgerFields)
		}
	}
	return rows, errOut
}

func TestBookFlowOnSim(t *testing.T) {
	clearOfSimDayTurns(t)
	s := newSession(t, "")
	offers := s.search()
	id := offers[0]["id"].(string)
	if offers[0]["gpu_count"].(float64) != 8 || offers[0]["provider"] != "sim" {
		t.Fatalf("offering %v", offers[0])
	}

	// No terminal and no --yes: exit 2, one line naming --yes, nothing bought.
	code, _, errOut := s.run("book", id)
	if code != 2 || !strings.Contains(errOut, "pass --yes") {
		t.Fatalf("book without --yes: exit %d: %s", code, errOut)
	}
	if strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("the refusal is not one line: %s", errOut)
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("refused book wrote %v", rows)
	}

	// A dry run answers and records nothing.
	code, out, errOut := s.run("book", id, "--dry-run")
	if code != 0 || !strings.Contains(out, "would have succeeded") {
		t.Fatalf("dry run: exit %d: %s %s", code, out, errOut)
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("dry run wrote %v", rows)
	}

	code, out, errOut = s.run("book", id, "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("book --yes: exit %d: %s", code, errOut)
	}
	booked, _ := jsonRows(t, out)
	if len(booked) != 1 || booked[0]["state"] != "scheduled" || !strings.HasPrefix(booked[0]["provider_ref"].(string), "cr-") {
		t.Fatalf("booked %v", booked)
	}

	// The same command again buys nothing.
	code, _, errOut = s.run("book", id, "--yes")
	if code != 1 || !strings.Contains(errOut, "already booked") {
		t.Fatalf("second book: exit %d: %s", code, errOut)
	}
	rows, _ := s.ledger()
	if len(rows) != 1 || rows[0]["id"] != booked[0]["id"] || rows[0]["committed_usd"] != offers[0]["upfront_usd"] ||
		rows[0]["start"] != offers[0]["start"] || rows[0]["end"] != offers[0]["end"] {
		t.Fatalf("ledger %v\noffer %v", rows, offers[0])
	}
	// A new process's search no longer offers it.
	for _, o := range s.search() {
		if o["id"] == id {
			t.Fatalf("booked offering %s offered again", id)
		}
	}
}

func TestBookOverBudgetRefused(t *testing.T) {
	s := newSession(t, "budget: {max_booking_usd: 100, max_daily_usd: 1000}\n")
	id := s.search()[0]["id"].(string)
	for _, args := range [][]string{{"book", id, "--yes"}, {"book", id, "--dry-run"}} {
		code, _, errOut := s.run(args...)
		if code != 1 || !strings.Contains(errOut, "max_booking_usd $100.00") || !strings.Contains(errOut, "nothing was bought") {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("over-budget book wrote %v", rows)
	}
}

func TestBookUnknownID(t *testing.T) {
	s := newSession(t, "")
	code, _, errOut := s.run("book", "cb-nosuch", "--yes")
	if code != 1 || !strings.Contains(errOut, "search again") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestOfferingsUsage(t *testing.T) {
	s := newSession(t, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"offerings", "--count", "1", "--duration", "2d"}, "--gpu is required"},
		{[]string{"offerings", "--gpu", "H100", "--count", "0", "--duration", "2d"}, "--count 0"},
		{[]string{"offerings", "--gpu", "H100"}, "--duration is required"},
		{[]string{"offerings", "--provider", "aws", "--gpu", "H100", "--duration", "5h"}, "1-day steps"},
		{[]string{"offerings", "--gpu", "H100", "--duration", "2x"}, "--duration"},
		{[]string{"offerings", "--gpu", "H100", "--duration", "2d", "--start-after", "tomorrow"}, "--start-after"},
		{[]string{"offerings", "--gpu", "H100,A100", "--duration", "2d"}, "one GPU model"},
		{[]string{"offerings", "--gpu", "H100", "--duration", "2d", "--start-after", "+3d", "--start-before", "+1d"}, "is not after"},
		{[]string{"book"}, "accepts 1 arg"},
		{[]string{"fleet", "launch", "--instance-types", "p5.48xlarge", "--target", "2"}, "--region is required"},
		{[]string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "2", "--strategy", "cheap"}, "--strategy"},
		{[]string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "m5.large", "--target", "2"}, "m5.large"},
		{[]string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "2", "--on-demand-base", "3"}, "--on-demand-base"},
	} {
		code, _, errOut := s.run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q in one line", c.args, code, errOut, c.want)
		}
	}
}

func TestFleetFlowOnSim(t *testing.T) {
	s := newSession(t, "")
	launch := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge,p4d.24xlarge", "--target", "2", "--on-demand-base", "1"}
	code, _, errOut := s.run(launch...)
	if code != 2 || !strings.Contains(errOut, "pass --yes") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("launch without --yes: exit %d, want one line naming --yes: %s", code, errOut)
	}
	code, out, errOut := s.run(append(launch, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: exit %d: %s %s", code, out, errOut)
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("rows after refusals and dry run: %v", rows)
	}
	code, out, errOut = s.run(append(launch, "--yes", "-o", "json")...)
	if code != 0 {
		t.Fatalf("launch: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	// A fleet is dated from when it became active; it has no end yet, so
	// no committed or final cost, and has cost (about) nothing so far.
	if so, ok := rows[0]["cost_so_far_usd"].(float64); len(rows) != 1 || rows[0]["kind"] != "fleet" || rows[0]["start"] == nil || rows[0]["end"] != nil ||
		!ok || so < 0 || rows[0]["committed_usd"] != nil || rows[0]["cost_usd"] != nil {
		t.Fatalf("launched %v", rows)
	}
	ref, _ := rows[0]["provider_ref"].(string)
	if ref == "" {
		t.Fatalf("no fleet id: %v", rows[0])
	}
	code, _, errOut = s.run("fleet", "delete", rows[0]["id"].(string))
	if code != 2 || !strings.Contains(errOut, "pass --yes") {
		t.Fatalf("delete without --yes: exit %d: %s", code, errOut)
	}
	// The simulated fleet ended with the process that launched it: the
	// delete records that.
	code, out, errOut = s.run("fleet", "delete", ref, "--yes", "-o", "json")
	rows, _ = jsonRows(t, out)
	if code != 0 || len(rows) != 1 || rows[0]["state"] != "deleted" {
		t.Fatalf("delete: exit %d: %s %v", code, errOut, rows)
	}
}

// TestLedgerUnknownFleetCostIsNull: a fleet launched at unknown prices has
// no figure (null, not a price of zero); a priced one running for 2 hours
// has cost 2 × its hourly estimate so far, and no final cost yet.
func TestLedgerUnknownFleetCostIsNull(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	unknown := ledger.Entry{ID: "01JA", Kind: ledger.KindFleet, State: ledger.StateActive, USDHour: math.NaN(), ProviderRef: "fleet-a",
		CreatedAt: now.Add(-2 * time.Hour), CostNote: ledger.FleetEstimate{Basis: "unknown prices"}.Note()}
	known := ledger.Entry{ID: "01JB", Kind: ledger.KindFleet, State: ledger.StateActive, USDHour: 240, ProviderRef: "fleet-b",
		CreatedAt: now.Add(-2 * time.Hour), CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note()}
	var b bytes.Buffer
	if err := writeRows(&b, "json", []present.LedgerRow{present.NewLedgerRow(unknown, now), present.NewLedgerRow(known, now)}); err != nil {
		t.Fatal(err)
	}
	rows, _ := jsonRows(t, b.String())
	if len(rows) != 2 {
		t.Fatalf("%d rows:\n%s", len(rows), b.String())
	}
	if v, ok := rows[0]["cost_so_far_usd"]; !ok || v != nil {
		t.Errorf("unknown fleet cost_so_far_usd = %v (present %v), want null", v, ok)
	}
	if rows[1]["cost_so_far_usd"] != 480.0 || rows[1]["cost_usd"] != nil || rows[1]["committed_usd"] != nil {
		t.Errorf("priced fleet: so far %v, final %v, committed %v; want 480, null (running), null (no end)",
			rows[1]["cost_so_far_usd"], rows[1]["cost_usd"], rows[1]["committed_usd"])
	}
}

func TestParseSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{"48h": 48 * time.Hour, "2d": 48 * time.Hour, "26w": 182 * 24 * time.Hour} {
		if got, err := parseSpan(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "h", "0d", "183d", "27w", "1.5d", "-1d", "2 d", "30m"} {
		if _, err := parseSpan(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{"48h", "2d", "1w", "182d", "0d", "9999999999999999999w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseSpan(s)
		if err == nil && (d <= 0 || d > maxBlockSpan || d%time.Hour != 0) {
			t.Fatalf("%q → %v", s, d)
		}
	})
}

// TestBookAsksOnATerminal answers the prompt on a real pseudo-terminal:
// "yes" buys, anything else does not.
func TestBookAsksOnATerminal(t *testing.T) {
	clearOfSimDayTurns(t)
	s := newSession(t, "")
	offers := s.search()
	for _, c := range []struct {
		answer string
		code   int
		rows   int
	}{{"no\n", 1, 0}, {"yes\n", 0, 1}} {
		tty, closeTTY := answeredTTY(t, c.answer)
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"book", offers[0]["id"].(string)}, tty, &out, &errOut)
		closeTTY()
		if code != c.code || !strings.Contains(errOut.String(), "Type yes to buy it for $") {
			t.Fatalf("answer %q: exit %d: %s", c.answer, code, errOut.String())
		}
		if rows, _ := s.ledger(); len(rows) != c.rows {
			t.Fatalf("answer %q: %d ledger rows, want %d", c.answer, len(rows), c.rows)
		}
	}
}

// promptWatch is stderr for a command that asks on a terminal: it
// reports each question as it is written.
type promptWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	asked chan int // the number of questions so far, once per question
	n     int
}

func newPromptWatch() *promptWatch { return &promptWatch{asked: make(chan int, 8)} }

func (w *promptWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if c := strings.Count(w.buf.String(), "Type yes"); c > w.n {
		w.n = c
		w.asked <- c
	}
	return n, err
}

func (w *promptWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// onTerminal runs a command line on a pseudo-terminal; answer is called
// with each question's number and returns what to type.
func onTerminal(t *testing.T, c *cli, args []string, answer func(n int, errOut *promptWatch) string) (int, string) {
	t.Helper()
	ptm, tty := openTTY(t)
	defer ptm.Close()
	errOut := newPromptWatch()
	go func() {
		for n := range errOut.asked {
			ptm.Write([]byte(answer(n, errOut) + "\n"))
		}
	}()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- c.run(context.Background(), args, tty, &out, errOut) }()
	select {
	case code := <-done:
		tty.Close()
		return code, errOut.String()
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not end: waiting for an answer? stderr:\n%s", args, errOut.String())
	}
	return 0, ""
}

// TestBookBuysWhatItShowed: while `book` waits for the yes, another
// session's search changes the offering's terms in the data dir; the yes
// was given to the total shown, so nothing is bought at the new one until
// it is shown and confirmed in turn.
func TestBookBuysWhatItShowed(t *testing.T) {
	for _, second := range []string{"no", "yes"} {
		t.Run("second answer "+second, func(t *testing.T) {
			clearOfSimDayTurns(t)
			s := newSession(t, "")
			offers := s.search()
			id := offers[0]["id"].(string)
			var newPrice float64
			code, errOut := onTerminal(t, newCLI(), []string{"book", id, "-o", "json"}, func(n int, _ *promptWatch) string {
				if n > 1 {
					return second
				}
				st, err := ledger.Open(os.Getenv("GPUMARKET_DATA_DIR"))
				if err == nil {
					c, _ := st.Offering(context.Background(), id, time.Now())
					c.Offering.UpfrontUSD += 500
					newPrice = c.Offering.UpfrontUSD
					st.SaveOfferings(context.Background(), c.Query, []domain.Offering{c.Offering}, time.Now())
					st.Close()
				}
				return "yes"
			})
			if !strings.Contains(errOut, "changed since they were shown") || !strings.Contains(errOut, fmt.Sprintf("$%.2f", newPrice)) {
				t.Fatalf("exit %d: the new terms were not shown: %s", code, errOut)
			}
			rows, _ := s.ledger()
			switch second {
			case "no":
				if code != 1 || len(rows) != 0 || strings.Count(errOut, "Type yes") != 2 {
					t.Fatalf("declined the new terms: exit %d, rows %v: %s", code, rows, errOut)
				}
			case "yes":
				// Only the cached copy was changed: confirming it, the
				// purchase's fresh look at the market finds the market's
				// own terms again, shows them, and asks a third time; the
				// yes to those buys at them — never at terms not shown.
				if code != 0 || len(rows) != 1 || rows[0]["committed_usd"] != offers[0]["upfront_usd"] || strings.Count(errOut, "Type yes") != 3 {
					t.Fatalf("exit %d, rows %v, offer %v: %s", code, rows, offers[0], errOut)
				}
			}
		})
	}
}
