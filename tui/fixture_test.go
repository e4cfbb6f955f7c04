package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/series"
)

// fixedNow is a Monday afternoon, in UTC so time labels do not depend on
// the machine's zone.
var fixedNow = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)

func nowFn() time.Time { return fixedNow }

type fixturePool struct {
	provider, cloud, region, zone, itype, gpu string
	count, mem, onDemand, spot                float64
	bucket                                    string
	restricted                                bool
}

// fixturePools is a small deterministic market: both clouds, several GPU
// families, one restricted pool and one without interruption data.
var fixturePools = []fixturePool{
	{"sim", "aws", "us-east-1", "us-east-1a", "p5.48xlarge", "H100", 8, 80, 98.32, 24.10, ">20%", false},
	{"sim", "aws", "us-west-2", "us-west-2b", "p5.48xlarge", "H100", 8, 80, 98.32, 21.75, "15-20%", false},
	{"sim", "aws", "eu-west-1", "eu-west-1c", "p4d.24xlarge", "A100", 8, 40, 32.77, 9.83, "10-15%", false},
	{"sim", "aws", "us-east-1", "us-east-1b", "g6e.xlarge", "L40S", 1, 48, 1.861, 0.61, "5-10%", false},
	{"sim", "aws", "us-east-2", "us-east-2a", "g4dn.xlarge", "T4", 1, 16, 0.526, 0.158, "<5%", false},
	{"sim", "aws", "ap-northeast-1", "ap-northeast-1a", "g5.xlarge", "A10G", 1, 24, 1.006, 0.302, "", false},
	{"sim", "azure", "eastus", "1", "Standard_ND96isr_H100_v5", "H100", 8, 80, 98.32, 19.66, ">20%", false},
	{"sim", "azure", "westeurope", "2", "Standard_NC24ads_A100_v4", "A100", 1, 80, 3.673, 0.735, "5-10%", true},
	{"sim", "azure", "eastus", "3", "Standard_NC4as_T4_v3", "T4", 1, 16, 0.526, 0.105, "<5%", false},
}

// fixtureSeries is an hourly price over 8 days with a daily cycle and one
// spike, deterministic for the pool index.
func fixtureSeries(i int, base float64) series.Series {
	var at []int64
	var usd []float64
	start := fixedNow.Add(-8 * 24 * time.Hour)
	for t, k := start, 0; !t.After(fixedNow); t, k = t.Add(time.Hour), k+1 {
		p := base * (1 + 0.06*math.Sin(2*math.Pi*float64(k+i*3)/24) + 0.01*float64((k*7+i)%5))
		if k == 180-i*4 { // a short spike inside the last 24 hours for some pools
			p *= 1.6
		}
		at = append(at, t.Unix())
		usd = append(usd, p)
	}
	// the latest point is the pool's current price
	usd[len(usd)-1] = base
	return series.Series{}.Merge(at, usd)
}

func fixturePool0(i int, f fixturePool) feed.PoolView {
	p := domain.Pool{
		Provider: f.provider, Cloud: domain.Cloud(f.cloud), Region: f.region, Zone: f.zone,
		InstanceType: f.itype, GPU: domain.GPUSpec{Model: f.gpu, Count: f.count, MemoryGiB: f.mem},
		OnDemandUSDHour: domain.Float(f.onDemand), Restricted: f.restricted, Simulated: f.provider == "sim",
	}
	if f.bucket != "" {
		p.Interruption, _ = domain.NewInterruption(f.bucket, "sim", fixedNow)
	}
	return feed.PoolView{Pool: p, Key: p.Key().String(), History: fixtureSeries(i, f.spot), Changed: 1}
}

// fixtureSnapshot is the deterministic market the golden tests render.
func fixtureSnapshot() *feed.Snapshot {
	s := &feed.Snapshot{Seq: 1, Taken: fixedNow, Ready: true, HistoryFrom: fixedNow.Add(-8 * 24 * time.Hour)}
	for i, f := range fixturePools {
		s.Pools = append(s.Pools, fixturePool0(i, f))
	}
	sortPools(s)
	s.Sources = []feed.SourceStatus{{
		Provider: "sim", State: feed.StateReady, Note: "simulated market, seed 1",
		Regions: []feed.RegionStatus{{Region: "eastus", Done: 1, Total: 1}, {Region: "us-east-1", Done: 1, Total: 1}},
		LastOK:  fixedNow, Interval: 2 * time.Second,
	}}
	return s
}

func sortPools(s *feed.Snapshot) {
	slices.SortFunc(s.Pools, func(a, b feed.PoolView) int { return strings.Compare(a.Key, b.Key) })
}

// bigSnapshot is n pools for the benchmarks, each with a day of
// five-minute prices.
func bigSnapshot(n int) *feed.Snapshot {
	s := &feed.Snapshot{Seq: 1, Taken: fixedNow, Ready: true}
	s.Pools = make([]feed.PoolView, 0, n)
	for i := range n {
		f := fixturePools[i%len(fixturePools)]
		f.zone = fmt.Sprintf("%s-z%04d", f.region, i)
		pv := fixturePool0(i, f)
		var at []int64
		var usd []float64
		for t := fixedNow.Add(-24 * time.Hour); !t.After(fixedNow); t = t.Add(5 * time.Minute) {
			at = append(at, t.Unix())
			usd = append(usd, f.spot*(1+0.05*math.Sin(float64(t.Unix()/300+int64(i))/20)))
		}
		pv.History = series.Series{}.Merge(at, usd)
		s.Pools = append(s.Pools, pv)
	}
	sortPools(s)
	s.Sources = []feed.SourceStatus{{Provider: "sim", State: feed.StateReady, LastOK: fixedNow}}
	return s
}
