package feed

import (
	"slices"
	"sort"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// Snapshot is the market as the hub knows it at one moment; immutable, so
// subscribers read theirs from any goroutine without locks.
type Snapshot struct {
	// Seq grows by one for every snapshot published.
	Seq   uint64
	Taken time.Time
	// Pools are sorted by key.
	Pools []PoolView
	// Sources holds one status per provider, in the order they were given.
	Sources []SourceStatus
	// HistoryFrom: every source's history is back-filled from here; further back is loading.
	HistoryFrom time.Time
	// Ready: every source finished its first back-fill, successfully or not.
	Ready bool
}

// PoolView is one pool in a snapshot.
type PoolView struct {
	domain.Pool
	// Key is Pool.Key().String(), kept to avoid rebuilding it.
	Key string
	// History is the pool's price history; read-only.
	History series.Series
	// Changed is the Seq where the pool last changed, so subscribers redo only that.
	Changed uint64
	// AsOf is when the pool's region last answered; with Cached, when the history
	// cache last heard from it (no answer since start).
	AsOf   time.Time
	Cached bool
}

// Pool returns the pool with the key, if the snapshot has it.
func (s *Snapshot) Pool(key string) (*PoolView, bool) {
	i := sort.Search(len(s.Pools), func(i int) bool { return s.Pools[i].Key >= key })
	if i < len(s.Pools) && s.Pools[i].Key == key {
		return &s.Pools[i], true
	}
	return nil, false
}

// Source returns the status of the named provider.
func (s *Snapshot) Source(name string) (SourceStatus, bool) {
	i := slices.IndexFunc(s.Sources, func(st SourceStatus) bool { return st.Provider == name })
	if i < 0 {
		return SourceStatus{}, false
	}
	return s.Sources[i], true
}

// Simulated reports whether any source is a simulated market.
func (s *Snapshot) Simulated() bool {
	return slices.ContainsFunc(s.Sources, func(st SourceStatus) bool { return st.Simulated })
}

// Source states.
const (
	StateLoading = "loading" // first back-fill running
	StateReady   = "ready"   // data is live
	StateError   = "error"   // the last fetch failed as a whole
)

// SourceStatus is a provider's health, for the header.
type SourceStatus struct {
	Provider string
	// Simulated: the descriptor says so, and every screen must say it.
	Simulated bool
	State     string
	// Regions are the regions the provider has reported on, sorted.
	Regions []RegionStatus
	// Err is the last whole-provider failure, "" after a success.
	Err string
	// Note is the provider's latest status note.
	Note string
	// LastOK is when the last successful fetch ended.
	LastOK time.Time
	// Stale: older than three refresh intervals, or the last fetch failed.
	Stale bool
	// CachedAt is the oldest of its regions' CachedAt (zero: all live).
	CachedAt time.Time
	Interval time.Duration
}

// RegionStatus is one region's back-fill progress and health.
type RegionStatus struct {
	Region      string
	Done, Total int
	// Err is the region's last failure, "" once it answers again.
	Err    string
	LastOK time.Time
	// CachedAt: while the region's prices are the cache's, when the cache last heard from it.
	CachedAt time.Time
}

// Loading reports whether the region is still back-filling.
func (r RegionStatus) Loading() bool { return r.Total > 0 && r.Done < r.Total }
