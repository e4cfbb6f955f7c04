package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// Info describes a cache file, for `gpumarket cache info`.
type Info struct {
	Path string
	// Size is the file's bytes with its write-ahead log.
	Size    int64
	Version int
	Pools   int
	Points  int64
	Regions []RegionInfo
}

// RegionInfo is one region's pools, points and spans (one per GPU filter; none if not known whole).
type RegionInfo struct {
	Provider, Region string
	Pools            int
	Points           int64
	Spans            []Span
}

// ErrNoCache is returned by Stat when the data dir has no cache file.
var ErrNoCache = errors.New("no history cache")

// Stat reads the cache in dataDir without changing it; a file that is not one is reported, not moved.
func Stat(ctx context.Context, dataDir string) (Info, error) {
	path := Path(dataDir)
	info := Info{Path: path}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("%w at %s", ErrNoCache, path)
	}
	if err != nil {
		return info, err
	}
	info.Size = fi.Size()
	if wal, err := os.Stat(path + "-wal"); err == nil {
		info.Size += wal.Size()
	}
	db, err := sqlitedb.OpenReadOnly(ctx, path, historySchema)
	if err != nil {
		return info, err
	}
	defer db.Close()
	if err := db.Newer(historySchema); err != nil {
		return info, err
	}
	info.Version = db.Version
	byRegion := map[[2]string]*RegionInfo{}
	region := func(p, r string) *RegionInfo {
		k := [2]string{p, r}
		ri := byRegion[k]
		if ri == nil {
			ri = &RegionInfo{Provider: p, Region: r}
			byRegion[k] = ri
		}
		return ri
	}
	rows, err := db.QueryContext(ctx, `SELECT p.provider, p.region, COUNT(DISTINCT p.id), COALESCE(SUM(c.n), 0)
		FROM pools p LEFT JOIN chunks c ON c.pool = p.id GROUP BY p.provider, p.region`)
	err = sqlitedb.EachRow(rows, err, func() error {
		var p, r string
		var pools int
		var points int64
		if err := rows.Scan(&p, &r, &pools, &points); err != nil {
			return err
		}
		ri := region(p, r)
		ri.Pools, ri.Points = pools, points
		info.Pools += pools
		info.Points += points
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	srows, err := db.QueryContext(ctx, `SELECT provider, region, gpus, from_at, until_at FROM spans ORDER BY provider, region, gpus`)
	err = sqlitedb.EachRow(srows, err, func() error {
		var p string
		var s Span
		if err := scanSpan(srows, &s, &p); err != nil {
			return err
		}
		ri := region(p, s.Region)
		ri.Spans = append(ri.Spans, s)
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	for _, ri := range byRegion {
		info.Regions = append(info.Regions, *ri)
	}
	slices.SortFunc(info.Regions, func(a, b RegionInfo) int {
		return cmp.Or(strings.Compare(a.Provider, b.Provider), strings.Compare(a.Region, b.Region))
	})
	return info, nil
}
