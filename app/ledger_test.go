package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// A running fleet is said with how long it has run: up to now, or up to
// its end when that has passed and it is not deleted yet; a scheduled end
// still to come is said with its countdown.
func TestFleetLinesSayHowLongItRan(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	a := &App{table: DefaultTable()}
	fleet := func(start, end time.Time, sched ledger.FleetSchedule) ledger.Entry {
		return ledger.Entry{ID: "L1", Kind: ledger.KindFleet, State: ledger.StateActive, Provider: "aws", ProviderRef: "fleet-1",
			InstanceType: "p5.48xlarge", InstanceCount: 1, USDHour: 2, Start: start, End: end, Schedule: sched}
	}
	for _, c := range []struct {
		name string
		row  ledger.Entry
		want string
	}{
		{"until deleted", fleet(now.Add(-3*time.Hour), time.Time{}, ledger.FleetSchedule{}),
			"ledger: fleet fleet-1 (L1) running for 3h, about $6.00 so far at $2.00/h"},
		{"its end passed", fleet(now.Add(-4*time.Hour), now.Add(-time.Hour), ledger.FleetSchedule{}),
			"ledger: fleet fleet-1 (L1) running for 3h, about $6.00 so far at $2.00/h"},
		{"its end to come", fleet(now.Add(-3*time.Hour), now.Add(2*time.Hour), ledger.FleetSchedule{End: now.Add(2 * time.Hour), Keeper: ledger.KeptByCloud}),
			"ledger: fleet fleet-1 (L1) running for 3h, about $6.00 so far at $2.00/h; ends Sun 14:00 UTC (in 2h): "},
	} {
		var lines []string
		a.sayFleet(c.row, now, func(format string, args ...any) { lines = append(lines, fmt.Sprintf("ledger: "+format, args...)) })
		if len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%s: %q, want one line starting %q", c.name, lines, c.want)
		}
	}
}
