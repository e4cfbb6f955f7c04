package cmd

import (
	"math"
	"strings"
	"testing"
)

// TestFleetWholeCommitmentOverTheDefaultCaps: 80 on-demand p5.48xlarge
// for 90 days are held at their whole estimate, not their first hour:
// refused by the default caps, naming the cap, the figure, the key and
// the config file; its dry run says so and still shows the cloud's
// answer. Nothing is recorded.
func TestFleetWholeCommitmentOverTheDefaultCaps(t *testing.T) {
	s := newSession(t, "budget: {max_booking_usd: 5000, max_daily_usd: 20000}\n")
	launch := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "80", "--on-demand-base", "80", "--for", "90d"}
	code, _, errOut := s.run(append(launch, "--yes")...)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (refused): %s", code, errOut)
	}
	for _, want := range []string{"budget.max_booking_usd", "$5000.00", "90d at $", "config.yaml"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, errOut)
		}
	}
	code, out, errOut := s.run(append(launch, "--dry-run")...)
	if code != 1 || !strings.Contains(out, "dry run:") || !strings.Contains(errOut, "would be refused") || !strings.Contains(errOut, "budget.max_booking_usd") {
		t.Fatalf("dry run over the cap: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("rows after refusals: %v", rows)
	}
}

// TestBookDryRunOverACapShowsTheCloudsAnswer: `book --dry-run` over a cap
// says the purchase would be refused (exit 1) and still prints what the
// cloud's dry run answered.
func TestBookDryRunOverACapShowsTheCloudsAnswer(t *testing.T) {
	s := newSession(t, "budget: {max_booking_usd: 100, max_daily_usd: 1000}\n")
	id := s.search()[0]["id"].(string)
	code, out, errOut := s.run("book", id, "--dry-run")
	if code != 1 || !strings.Contains(out, "dry run:") || !strings.Contains(errOut, "would be refused") || !strings.Contains(errOut, "max_booking_usd $100.00") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestLedgerFigures: `ledger -o json` says what a row may cost over its
// window (committed_usd: 3 × the hourly estimate of a 3-hour fleet), what
// it cost so far, and its final cost once over (cost_usd: 0 for a
// scheduled fleet cancelled before its start; null while running).
func TestLedgerFigures(t *testing.T) {
	s := newSession(t, "")
	fleet := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "2", "--on-demand-base", "2"}
	code, out, errOut := s.run(append(fleet, "--for", "3h", "--dry-run", "-o", "json")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	dry, _ := jsonRows(t, out)
	hourly, _ := dry[0]["estimated_usd_hour"].(float64)
	code, out, errOut = s.run(append(fleet, "--for", "3h", "--yes", "-o", "json")...)
	if code != 0 {
		t.Fatalf("launch: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	committed, _ := rows[0]["committed_usd"].(float64)
	if !(hourly > 0) || math.Abs(committed-3*hourly) > 0.01*3*hourly || rows[0]["cost_usd"] != nil {
		t.Fatalf("a 3-hour fleet at $%v/h: %v, want committed_usd ≈ $%.2f and cost_usd null while it runs", hourly, rows[0], 3*hourly)
	}
	code, out, errOut = s.run(append(fleet, "--start", "+1d", "--for", "3h", "--yes", "-o", "json")...)
	if code != 0 {
		t.Fatalf("schedule: exit %d: %s", code, errOut)
	}
	rows, _ = jsonRows(t, out)
	id := rows[0]["id"].(string)
	if code, _, errOut := s.run("fleet", "delete", id, "--yes"); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, errOut)
	}
	all, _ := s.ledger()
	for _, r := range all {
		if r["id"] == id && (r["cost_usd"] != 0.0 || r["cost_so_far_usd"] != 0.0 || r["state"] != "deleted") {
			t.Errorf("a fleet cancelled before its start: %v, want cost_usd 0", r)
		}
	}
}

// TestSameScheduledFleetTwiceRefused: the same scheduled fleet booked a
// second time is refused, naming the first row, before any question;
// --again books it.
func TestSameScheduledFleetTwiceRefused(t *testing.T) {
	s := newSession(t, "")
	fleet := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "2",
		"--start", "+1d", "--for", "3h", "--yes", "-o", "json"}
	code, out, errOut := s.run(fleet...)
	if code != 0 {
		t.Fatalf("schedule: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	first := rows[0]["id"].(string)
	code, _, errOut = s.run(fleet...)
	if code != 1 || !strings.Contains(errOut, first) || !strings.Contains(errOut, "--again") {
		t.Fatalf("the same fleet again: exit %d: %s", code, errOut)
	}
	if code, _, errOut := s.run(append(fleet, "--again")...); code != 0 {
		t.Fatalf("--again: exit %d: %s", code, errOut)
	}
	if all, _ := s.ledger(); len(all) != 2 {
		t.Fatalf("%d rows, want the first and the one asked for again", len(all))
	}
}
