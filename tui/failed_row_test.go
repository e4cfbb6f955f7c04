package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// TestEverySessionIsToldOfAFailedRow: a fleet that launched none of its
// 30 instances (the cloud took the request and failed it) is told in the
// footer of a session on another view, which did not launch it; in the
// Ledger it shows no run time and costs nothing.
func TestEverySessionIsToldOfAFailedRow(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Market")
	f.tick() // the Ledger has read the ledger once
	f.fake.LaunchNothing = "InsufficientInstanceCapacity: no spot capacity in us-east-1"
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 30}
	res, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
	if err != nil && res.Row.ID == "" {
		t.Fatal(err)
	}
	if res.Row.State != ledger.StateFailed || res.Row.ProviderRef == "" {
		t.Fatalf("row %+v: want a failed fleet the cloud named", res.Row)
	}
	f.tick()
	scr := strings.Join(strings.Fields(f.screen()), " ")
	if !strings.Contains(scr, "failed: InsufficientInstanceCapacity") || !strings.Contains(scr, short(res.Row.ID)) {
		t.Errorf("no word of the failed row in the footer:\n%s", f.screen())
	}
	r := present.NewLedgerRow(res.Row, fixedNow.Add(15*60e9))
	if left, soFar := present.LedgerTimeLeft.Cell(&r), present.LedgerSoFar.Cell(&r); left != "-" || soFar != "0.0000" {
		t.Errorf("a fleet that launched nothing shows %q and costs %q so far; want no run time and 0", left, soFar)
	}
}
