package azure

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A live poll whose rows fill more than one Resource Graph page reads
// every page: its query has no limit operator, which Resource Graph does
// not page (the fake, like the service, then gives no $skipToken).
func TestLivePollReadsEveryPage(t *testing.T) {
	f := newFakeARM(t)
	opt := f.options()
	opt.HistoryLookback = time.Hour
	p := newTestProvider(t, opt)
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus"), (&recorder{}).sink); err != nil {
		t.Fatal(err)
	}
	since := testNow.Add(-72 * time.Hour)
	from := since.Add(-opt.HistoryLookback)
	var rec recorder
	pagesBefore := f.graphPages
	live := domain.FetchRequest{Query: domain.Query{Regions: []string{"eastus"}}, Since: since, Until: testNow}
	if err := p.Fetch(context.Background(), live, rec.sink); err != nil {
		t.Fatal(err)
	}
	if err := rec.regionErr("eastus"); err != nil {
		t.Fatalf("eastus: %v", err)
	}
	want := map[string]int{}
	total := 0
	for _, r := range f.history {
		if !strings.EqualFold(r.Location, "eastus") || !strings.EqualFold(r.Properties.OSType, "linux") {
			continue
		}
		for _, raw := range r.Properties.SpotPrices {
			var sp struct {
				EffectiveDate time.Time `json:"effectiveDate"`
			}
			_ = json.Unmarshal(raw, &sp)
			if !sp.EffectiveDate.Before(from) {
				want[strings.ToLower(r.SKU.Name)]++
			}
		}
	}
	checked := 0
	for k := range rec.pools() {
		n, ok := want[strings.ToLower(k.InstanceType)]
		if !ok || n == 0 {
			continue
		}
		checked++
		total += n
		if got := len(rec.points(k)); got != n {
			t.Errorf("%s: %d live points, want all %d since %s", k, got, n, from.Format(time.RFC3339))
		}
	}
	if checked == 0 || total <= f.graphPageSize || f.graphPages-pagesBefore < 2 {
		t.Fatalf("the poll was not paged: %d pools with history, %d points, %d pages of %d", checked, total, f.graphPages-pagesBefore, f.graphPageSize)
	}
}
