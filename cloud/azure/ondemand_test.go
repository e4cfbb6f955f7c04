package azure

import (
	"testing"
)

// A region may list a size's on-demand meter twice, the old price and the
// new one (as it does spot meters): the newest must win whatever the order
// of the pages, or savings are computed against a price no longer asked.
func TestRetailOnDemandNewestWins(t *testing.T) {
	want := map[string]bool{"standard_nc24ads_a100_v4": true}
	item := func(usd float64, from string) retailItem {
		return retailItem{CurrencyCode: "USD", RetailPrice: usd, ArmRegionName: "eastus", ProductName: "Virtual Machines NCads A100 v4 Series",
			SkuName: "NC24ads A100 v4", MeterName: "NC24ads A100 v4", ServiceName: "Virtual Machines", ArmSkuName: "Standard_NC24ads_A100_v4",
			Type: "Consumption", UnitOfMeasure: "1 Hour", EffectiveStartDate: from}
	}
	old, cur := item(4.1, "2024-01-01T00:00:00Z"), item(3.673, "2025-07-01T00:00:00Z")
	for name, order := range map[string][]retailItem{"old first": {old, cur}, "new first": {cur, old}} {
		out := map[string]retailPrice{}
		for _, it := range order {
			addRetailItem(out, it, "eastus", want)
		}
		if od := out["standard_nc24ads_a100_v4"].OnDemand; od == nil || *od != 3.673 {
			t.Errorf("%s: on-demand %v, want the newest meter's 3.673", name, od)
		}
	}
	// Spot meters alike, and SpotAt is the winner's effectiveStartDate.
	spot := func(it retailItem) retailItem {
		it.SkuName, it.MeterName = it.SkuName+" Spot", it.MeterName+" Spot"
		return it
	}
	oldSpot, curSpot := spot(item(1.2, "2024-01-01T00:00:00Z")), spot(item(0.9, "2025-07-01T00:00:00Z"))
	for name, order := range map[string][]retailItem{"old first": {oldSpot, curSpot}, "new first": {curSpot, oldSpot}} {
		out := map[string]retailPrice{}
		for _, it := range order {
			addRetailItem(out, it, "eastus", want)
		}
		if rp := out["standard_nc24ads_a100_v4"]; rp.Spot == nil || *rp.Spot != 0.9 || rp.SpotAt.Format("2006-01-02") != "2025-07-01" {
			t.Errorf("%s: spot %v from %v, want the newest meter's 0.9 from 2025-07-01", name, rp.Spot, rp.SpotAt)
		}
	}
}
