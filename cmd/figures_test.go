package cmd

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// TestOneCostSoFarEverywhere reads the same rows' cost so far in all four
// places — `ledger -o json`, `usage -o json`, and the Ledger and Usage
// views of a served TUI session — and finds the one figure of
// ledger.FiguresOf: a fleet that ran 3 hours at $12.34/h, a block paid
// $1,234.50 up front.
func TestOneCostSoFarEverywhere(t *testing.T) {
	viewer, vline := testutil.SSHKey(t, "", "attendee")
	srv := startServe(t, vline+"\n")
	st, err := ledger.Open(srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	ctx := context.Background()
	rows := []ledger.Entry{
		{ID: "01FIGFLEET0000000000000000", Kind: ledger.KindFleet, Provider: "sim", Cloud: "aws", Region: "us-east-1", InstanceType: "g6.xlarge",
			InstanceCount: 2, GPUCount: 2, Start: now.Add(-5 * time.Hour), End: now.Add(-2 * time.Hour), CostUSD: math.NaN(), USDHour: 12.34,
			State: ledger.StateDeleted, ProviderRef: "fleet-figures", Actor: "local:alice", CreatedAt: now.Add(-5 * time.Hour), IdemKey: "tok-fig"},
		{ID: "01FIGBLOCK0000000000000000", Kind: ledger.KindBlock, Provider: "sim", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", InstanceCount: 1, GPUCount: 8, Start: now.Add(-30 * time.Hour), End: now.Add(-6 * time.Hour),
			CostUSD: 1234.5, USDHour: math.NaN(), State: ledger.StateEnded, ProviderRef: "cr-figures", Actor: "local:alice",
			CreatedAt: now.Add(-40 * time.Hour), IdemKey: "cb-fig"},
	}
	want := map[string]float64{}
	for _, r := range rows {
		if _, err := st.RecordIntent(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
		want[r.ID] = ledger.FiguresOf(r, now).SoFar
	}
	st.Close()
	if math.Abs(want[rows[0].ID]-3*12.34) > 1e-9 || want[rows[1].ID] != 1234.5 {
		t.Fatalf("figures %v", want)
	}

	s := &session{t: t}
	got, _ := s.ledger()
	for _, r := range got {
		if w, ok := want[r["id"].(string)]; ok && math.Abs(r["cost_so_far_usd"].(float64)-w) > 1e-6 {
			t.Errorf("ledger -o json: %s cost so far %v, want %v", r["id"], r["cost_so_far_usd"], w)
		}
	}
	code, out, errOut := s.run("usage", "-o", "json")
	if code != 0 {
		t.Fatalf("usage: exit %d: %s", code, errOut)
	}
	usage, _ := jsonRows(t, out)
	if len(usage) != 2 {
		t.Fatalf("usage rows %v", usage)
	}
	for _, r := range usage {
		if w := want[r["id"].(string)]; math.Abs(r["cost_usd"].(float64)-w) > 1e-6 {
			t.Errorf("usage -o json: %s cost %v, want %v", r["id"], r["cost_usd"], w)
		}
	}

	a := sshTerm(t, srv.addr, viewer, 200, 40)
	a.WaitText(t, "SIMULATED MARKET")
	for _, v := range []struct{ title, tabs string }{{"SO FAR $", "\t\t\t\t\t"}, {"IDLE $", "\t"}} {
		a.Press(t, v.tabs)
		a.WaitText(t, v.title)
		// A full redraw: the renderer sends only the cells that change,
		// and a figure in the same place in both views is not sent again.
		if err := a.Sess.WindowChange(40, 199); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			a.WaitText(t, present.Money(want[r.ID]))
		}
	}
}
