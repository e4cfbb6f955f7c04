package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/azure"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/series"
)

func TestUnprefixed(t *testing.T) {
	if got := Unprefixed("aws", "aws: describe spot prices in us-east-1: throttled\nmore"); got != "describe spot prices in us-east-1: throttled" {
		t.Errorf("unprefixed = %q", got)
	}
	if got := Unprefixed("aws", "azure: x"); got != "azure: x" {
		t.Errorf("another source's prefix was cut: %q", got)
	}
}

// A warning is one readable line: an Azure price filter names every VM
// size in the URL a failed GET quotes.
func TestWarningCutsQuotedURLQueries(t *testing.T) {
	msg := `azure: retail prices in westeurope (page 1): Get "http://127.0.0.1:45041/api?$filter=serviceName%20eq%20%27Virtual%20Machines%27": dial tcp 127.0.0.1:37349: connect: connection refused`
	want := `retail prices in westeurope (page 1): Get "http://127.0.0.1:45041/api?…": dial tcp 127.0.0.1:37349: connect: connection refused`
	if got := Unprefixed("azure", msg); got != want {
		t.Errorf("unprefixed:\n got %s\nwant %s", got, want)
	}
}

// healthOf words every case of a deadline: a region failed (its cause),
// one still loading with prices (rows kept) or without (no rows), one
// asked but not reported on, a source still loading whose regions are all
// done, and an asked region that answered with nothing.
func TestHealthAccountsForEveryRegionAtTheDeadline(t *testing.T) {
	now := time.Now()
	pool := func(prov, region string, priced bool) feed.PoolView {
		p := domain.Pool{Provider: prov, Region: region, InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8}}
		pv := feed.PoolView{Pool: p, Key: p.Key().String()}
		if priced {
			pv.History = series.Series{}.Merge([]int64{now.Unix()}, []float64{30})
		}
		return pv
	}
	snap := &feed.Snapshot{
		Pools: []feed.PoolView{pool("aws", "us-east-1", true), pool("aws", "us-west-2", true), pool("azure", "eastus", true), pool("acme", "r1", true)},
		Sources: []feed.SourceStatus{
			{Provider: "aws", State: feed.StateLoading, Regions: []feed.RegionStatus{
				{Region: "eu-west-1", Err: "describe spot prices in eu-west-1: throttled"},
				{Region: "us-east-1", Done: 3, Total: 3},
				{Region: "us-west-2", Done: 1, Total: 4},
				{Region: "ap-south-1", Done: 0, Total: 2},
			}},
			{Provider: "azure", State: feed.StateReady, Regions: []feed.RegionStatus{{Region: "eastus", Done: 4, Total: 4}}},
			// Every region done, the fetch not ended (AWS's placement
			// scores come after the regions).
			{Provider: "acme", State: feed.StateLoading, Regions: []feed.RegionStatus{{Region: "r1", Done: 1, Total: 1}}},
		},
	}
	q := domain.Query{Regions: []string{"us-east-1", "us-west-2", "eu-west-1", "ap-south-1", "ca-central-1", "eastus", "marsville", "r1"}}
	desc := map[string]domain.Descriptor{"aws": aws.Descriptor, "azure": azure.Descriptor,
		"acme": {Name: "acme", IsRegion: func(r string) bool { return r == "r1" }}}
	h := healthOf(snap, q, desc)
	var b strings.Builder
	h.write(&b, 2*time.Minute)
	want := []string{
		"gpumarket: warning: aws eu-west-1: describe spot prices in eu-west-1: throttled",
		"gpumarket: warning: aws us-west-2: had not finished within --timeout 2m: its rows may lack part of the window",
		"gpumarket: warning: aws ap-south-1: did not answer within --timeout 2m",
		"gpumarket: warning: aws ca-central-1: did not answer within --timeout 2m",
		"gpumarket: warning: azure marsville: answered with no GPU pools: none sold there, or no azure region of that name (such as eastus)",
		"gpumarket: warning: acme: had not finished within --timeout 2m: the rows show what it had sent (a region it had not reported on is missing)",
	}
	if got := strings.TrimSpace(b.String()); got != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if !h.answered {
		t.Error("regions answered, yet not answered")
	}
}

// A --gpu model is refused before any search when no pool within the
// filters sells it; a pool this account may not launch in does not count.
func TestCheckModelsSold(t *testing.T) {
	pool := func(region, model string, restricted bool) feed.PoolView {
		p := domain.Pool{Provider: "azure", Region: region, InstanceType: "t-" + model, GPU: domain.GPUSpec{Model: model, Count: 8}, Restricted: restricted}
		return feed.PoolView{Pool: p, Key: p.Key().String()}
	}
	snap := &feed.Snapshot{Pools: []feed.PoolView{pool("eastus", "A100", false), pool("eastus", "H100", true), pool("westus", "L4", false)}}
	s := &Settings{Query: domain.Query{Regions: []string{"eastus"}}}
	if err := s.CheckModelsSold(snap, []string{"A100"}); err != nil {
		t.Errorf("a model sold: %v", err)
	}
	for _, m := range []string{"H100", "L4"} {
		var ue *UsageError
		err := s.CheckModelsSold(snap, []string{"A100", m})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--gpu A100,"+m+": no pool of the market in eastus sells "+m) {
			t.Errorf("%s (restricted, or sold in another region only): %v, want a usage error naming it", m, err)
		}
	}
}
