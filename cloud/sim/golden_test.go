package sim

import (
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// historyDigest hashes every point of a fetch, pool by pool in key order.
func historyDigest(c *capture) (sum uint64, n int) {
	h := fnv.New64a()
	keys := make([]string, 0, len(c.points))
	for k := range c.points {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b [16]byte
	for _, k := range keys {
		h.Write([]byte(k))
		ats := make([]int64, 0, len(c.points[k]))
		for at := range c.points[k] {
			ats = append(ats, at)
		}
		slices.Sort(ats)
		for _, at := range ats {
			u := math.Float64bits(c.points[k][at])
			for i := range 8 {
				b[i], b[8+i] = byte(uint64(at)>>(8*i)), byte(u>>(8*i))
			}
			h.Write(b[:])
			n++
		}
	}
	return h.Sum64(), n
}

// TestHistoryIsUnchanged pins the simulated market's prices: seed 1's
// history over the ten days before wed (a weekend and a spike or two in
// every region), hashed. The generator may get faster; what it generates
// may not move, or a user's numbers change under them. A deliberate
// change of the price model updates the digest and says so in its commit.
func TestHistoryIsUnchanged(t *testing.T) {
	m := newAt(1, wed)
	c := fetch(t, m, domain.FetchRequest{Since: wed.Add(-10 * 24 * time.Hour), Until: wed, Backfill: true})
	// Google's pools came later: the others' history did not move.
	google := &capture{points: map[string]map[int64]float64{}}
	for k, pts := range c.points {
		if regionCloud(strings.Split(k, "/")[1]) == domain.CloudGCP {
			google.points[k] = pts
			delete(c.points, k)
		}
	}
	for _, d := range []struct {
		c       *capture
		wantSum uint64
		wantN   int
		what    string
	}{{c, 0x8e27629a569942e, 431170, "AWS and Azure"}, {google, 0xdb701d5999784efa, 182, "Google"}} {
		if sum, n := historyDigest(d.c); sum != d.wantSum || n != d.wantN {
			t.Errorf("%s history digest %#x over %d points, want %#x over %d", d.what, sum, n, d.wantSum, d.wantN)
		}
	}
}

// regionCloud is the cloud of a simulated region.
func regionCloud(name string) domain.Cloud {
	for _, r := range gcpRegions {
		if r.Name == name {
			return domain.CloudGCP
		}
	}
	return ""
}
