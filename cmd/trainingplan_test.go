package cmd

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTrainingPlanThroughTheLedger: on the simulated market, offerings
// lists training plans with their segments (a list in JSON, its JSON text
// in CSV), --kind narrows, counts and lengths a plan is not sold in are
// refused before any search (exit 2), a dry run says SageMaker has none
// and records nothing, and book makes a training-plan ledger row.
func TestTrainingPlanThroughTheLedger(t *testing.T) {
	clearOfSimDayTurns(t)
	s := newSession(t, "")
	code, out, errOut := s.run("offerings", "--gpu", "H100", "--count", "2", "--duration", "48h", "-o", "json")
	if code != 0 {
		t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	kinds := map[string]int{}
	var plan map[string]any
	for _, r := range rows {
		kinds[r["kind"].(string)]++
		segs, ok := r["segments"].([]any)
		if !ok || len(segs) == 0 {
			t.Fatalf("row %v: segments not a list", r)
		}
		if r["kind"] == "training-plan" && len(segs) == 2 && plan == nil {
			plan = r
		}
		if r["kind"] == "block" && len(segs) != 1 {
			t.Errorf("a block with %d segments", len(segs))
		}
	}
	if kinds["training-plan"] == 0 || kinds["block"] == 0 || plan == nil {
		t.Fatalf("kinds %v: want blocks and training plans, one of two segments", kinds)
	}
	seg := plan["segments"].([]any)[1].(map[string]any)
	for _, k := range []string{"instance_type", "instance_count", "zone", "start", "end"} {
		if _, ok := seg[k]; !ok {
			t.Errorf("segment %v has no %s", seg, k)
		}
	}
	if plan["duration_hours"].(float64) != 48 {
		t.Errorf("a plan's duration_hours %v, want the 48 its segments hold", plan["duration_hours"])
	}

	code, out, _ = s.run("offerings", "--gpu", "H100", "--count", "2", "--duration", "48h", "--kind", "training-plan", "-o", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != kinds["training-plan"]+1 || !strings.HasSuffix(lines[0], ",kind,segments") {
		t.Fatalf("--kind training-plan -o csv: exit %d, %d lines, want %d plans", code, len(lines)-1, kinds["training-plan"])
	}
	cell := lines[1][strings.Index(lines[1], ",training-plan,")+len(",training-plan,"):]
	var segs []map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.Trim(cell, `"`), `""`, `"`)), &segs); err != nil || len(segs) == 0 {
		t.Errorf("CSV segments %q: not JSON text of a list (%v)", cell, err)
	}

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--count", "3", "--duration", "48h", "--kind", "training-plan"}, "1, 2, 4, 8, 16, 32 or 64"},
		{[]string{"--count", "2", "--duration", "36h", "--kind", "training-plan"}, "whole days, 1 to 182"},
		{[]string{"--count", "2", "--duration", "48h", "--kind", "plans"}, "block, reservation, gcp-calendar, training-plan"},
	} {
		code, _, errOut := s.run(append([]string{"offerings", "--gpu", "H100"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("offerings %v: exit %d: %s; want exit 2 naming %q", c.args, code, errOut, c.says)
		}
	}

	id := plan["id"].(string)
	code, out, errOut = s.run("book", id, "--dry-run")
	if code != 0 || !strings.Contains(out, "no dry run") || !strings.Contains(errOut, "segment 2 of 2") || !strings.Contains(errOut, "no dry run:") {
		t.Fatalf("dry run: exit %d: %s %s", code, out, errOut)
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("dry run wrote %v", rows)
	}
	code, _, errOut = s.run("book", id, "--yes")
	if code != 0 {
		t.Fatalf("book: exit %d: %s", code, errOut)
	}
	led, _ := s.ledger()
	if len(led) != 1 || led[0]["kind"] != "training-plan" || !strings.HasPrefix(led[0]["provider_ref"].(string), "arn:aws:sagemaker:") ||
		led[0]["committed_usd"] != plan["upfront_usd"] {
		t.Fatalf("ledger %v, want one training-plan row at %v", led, plan["upfront_usd"])
	}
}
