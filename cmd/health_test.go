package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// partialMarket's only region sends its pools and prices and then an
// error, as Azure does when Resource Graph fails but list prices answer.
type partialMarket struct{ now time.Time }

func (partialMarket) Name() string { return "fake" }
func (partialMarket) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "fake"}
}

func (m partialMarket) Fetch(_ context.Context, _ domain.FetchRequest, sink domain.Sink) error {
	p := domain.Pool{Provider: "fake", Cloud: domain.CloudAzure, Region: "eastus", Zone: "1",
		InstanceType: "Standard_NC24ads_A100_v4", GPU: domain.GPUSpec{Model: "A100", Count: 1, MemoryGiB: 80},
		OnDemandUSDHour: domain.Float(3.673)}
	sink(domain.Event{Region: "eastus", Pools: []domain.Pool{p},
		Points: []domain.PricePoint{{Pool: p.Key(), At: m.now.Add(-time.Hour), USDHour: 0.7346}}})
	sink(domain.Event{Region: "eastus", Err: errors.New("spot price history in eastus: resource graph query (page 1): 400 BadRequest")})
	return nil
}

// A region that sent prices and then failed a part (its history) has
// answered: its rows are printed with a warning, not dropped with exit 1.
func TestPricesRegionWithDataAndErrorAnswered(t *testing.T) {
	e, _, errOut := testEnv(t, domain.Query{})
	snap, err := e.snapshotOf(context.Background(), []domain.Provider{partialMarket{now: time.Now()}}, time.Minute)
	if err != nil {
		t.Fatalf("a region with prices counted as not answering: %v", err)
	}
	if !strings.Contains(errOut.String(), "warning: fake eastus: spot price history in eastus") {
		t.Errorf("stderr %q, want the region's warning", errOut)
	}
	rows := e.priceRows(snap)
	if len(rows) != 1 || rows[0].Spot != 0.7346 {
		t.Errorf("rows %+v, want the region's one pool with its price", rows)
	}
}
