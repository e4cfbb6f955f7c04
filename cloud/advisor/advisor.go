// Package advisor reads AWS's Spot Instance Advisor data; a dated snapshot is embedded.
package advisor

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

//go:embed spot-advisor-2025-06.json
var embedded []byte

// EmbeddedAsOf is when the embedded snapshot was taken.
var EmbeddedAsOf = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// Data is a parsed advisor file; Regions maps region → OS → instance type.
type Data struct {
	Ranges  []Range                                `json:"ranges"`
	Regions map[string]map[string]map[string]Entry `json:"spot_advisor"`
	AsOf    time.Time                              `json:"-"`
	Source  string                                 `json:"-"`
}

// Range is one interruption bucket of the file.
type Range struct {
	Index int    `json:"index"`
	Label string `json:"label"`
	Max   int    `json:"max"`
}

// Entry is an instance type's figures in a region: spot's saving in percent, its Range's index.
type Entry struct {
	SavingsPct int `json:"s"`
	Range      int `json:"r"`
}

// Parse reads an advisor file, checking for ranges, regions and in-bounds range indexes.
func Parse(b []byte, source string, asOf time.Time) (*Data, error) {
	w := &Data{AsOf: asOf, Source: source}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("spot advisor data from %s: %w", source, err)
	}
	if len(w.Ranges) == 0 || len(w.Regions) == 0 {
		return nil, fmt.Errorf("spot advisor data from %s: no ranges or no regions", source)
	}
	for _, r := range w.Ranges {
		if _, ok := domain.NormalizeBucket(r.Label); !ok {
			return nil, fmt.Errorf("spot advisor data from %s: unknown interruption range %q", source, r.Label)
		}
	}
	for region, oses := range w.Regions {
		for os, types := range oses {
			for t, e := range types {
				if e.Range < 0 || e.Range >= len(w.Ranges) {
					return nil, fmt.Errorf("spot advisor data from %s: %s %s %s: range index %d out of bounds", source, region, os, t, e.Range)
				}
			}
		}
	}
	return w, nil
}

var embeddedData = sync.OnceValues(func() (*Data, error) { return Parse(embedded, "embedded 2025-06", EmbeddedAsOf) })

// Embedded returns the embedded snapshot (June 2025), parsed once.
func Embedded() *Data {
	d, err := embeddedData()
	if err != nil {
		panic(err) // the embedded file is part of the build
	}
	return d
}

// Lookup returns the Linux figures for an instance type in a region.
func (d *Data) Lookup(region, instanceType string) (Entry, bool) {
	e, ok := d.Regions[region]["Linux"][instanceType]
	return e, ok
}

// Interruption returns the Linux interruption data of an instance type in a region.
func (d *Data) Interruption(region, instanceType string) (*domain.Interruption, bool) {
	e, ok := d.Lookup(region, instanceType)
	if !ok {
		return nil, false
	}
	return domain.NewInterruption(d.Ranges[e.Range].Label, "aws spot advisor ("+d.Source+")", d.AsOf)
}

// RawEmbedded returns the embedded file's bytes.
func RawEmbedded() []byte { return embedded }
