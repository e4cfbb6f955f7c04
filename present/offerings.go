package present

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// OfferingRow is an offering; the Blocks view adds START's zone and Alt.
type OfferingRow struct {
	domain.Offering
	Loc *time.Location
	Alt SpotAlt
}

// SpotAlt is the pool of lowest EFF for a block's GPUs and hours.
type SpotAlt struct {
	Pool             *feed.PoolView
	Effective, Total float64
}

type offerCol = Col[*OfferingRow]

var (
	OfferPerGPU = &offerCol{Title: "$/GPU-h", Width: 7, Right: true, Prio: 0,
		Cell:  func(r *OfferingRow) string { return Money(r.USDPerGPUHour()) },
		Field: "usd_gpu_hour", Format: "%.4f", Value: func(r *OfferingRow) any { return Round(r.USDPerGPUHour(), 6) }}
	OfferUpfront = &offerCol{Title: "UPFRONT $", Width: 9, Right: true, Prio: 1,
		Cell:  func(r *OfferingRow) string { return fmt.Sprintf("%.2f", r.UpfrontUSD) },
		Field: "upfront_usd", Format: "%.2f", Value: func(r *OfferingRow) any { return r.UpfrontUSD }}
	// OfferHourly keeps an hourly bill from being read as a fee.
	OfferHourly = &offerCol{Title: "$/H", Width: 5, Right: true, Prio: 6, Cell: func(r *OfferingRow) string {
		if r.HourlyUSD > 0 {
			return Money(r.HourlyUSD)
		}
		return "-"
	}, Field: "$/h", Format: "%.2f", TableOnly: true, Value: func(r *OfferingRow) any { return positive(r.HourlyUSD) }}
	OfferInstances = &offerCol{Title: "INSTANCES", Width: 16, Prio: 9, MaxWidth: 24,
		Cell: func(r *OfferingRow) string {
			return fmt.Sprintf("%d×%s", r.InstanceCount, DisplayType(r.InstanceType))
		}}
	OfferGPUs = &offerCol{Title: "GPUs", Width: 4, Right: true, Prio: 3, Cell: func(r *OfferingRow) string { return GPUCount(r.GPUCount()) },
		Field: "gpu_count", Format: "%g", Value: func(r *OfferingRow) any { return r.GPUCount() }}
	OfferWhere = &offerCol{Title: "WHERE", Width: 13, Prio: 5, MaxWidth: 18, Cell: func(r *OfferingRow) string { return Place(r.Region, r.Zone) }}
	OfferStart = &offerCol{Title: "START (local)", Width: 15, Prio: 2,
		Cell:  func(r *OfferingRow) string { return r.Start.In(r.Loc).Format("01-02 15:04 MST") },
		Field: "start", Format: "local", Value: func(r *OfferingRow) any { return r.Start.UTC() }}
	OfferHours = &offerCol{Title: "HOURS", Width: 5, Right: true, Prio: 4, Cell: hoursCell,
		Field: "duration_hours", Format: "-", Value: func(r *OfferingRow) any { return r.HeldHours() }}
	OfferAlt = &offerCol{Title: "SPOT ALT*", Width: 9, Right: true, Prio: 7,
		Cell: func(r *OfferingRow) string { return r.alt(r.Alt.Effective) }}
	OfferAltTotal = &offerCol{Title: "ALT TOTAL", Width: 9, Right: true, Prio: 8,
		Cell: func(r *OfferingRow) string { return r.alt(r.Alt.Total) }}
	OfferAltPool = &offerCol{Title: "SPOT POOL", Width: 24, Prio: 10, Cell: func(r *OfferingRow) string {
		if r.Alt.Pool == nil {
			return "-"
		}
		return DisplayType(r.Alt.Pool.InstanceType) + " " + r.Alt.Pool.Region
	}}
	OfferKind = &offerCol{Title: "KIND", Width: 13, Prio: 11, Cell: func(r *OfferingRow) string { return r.Terms().Kind },
		Field: "kind", Value: func(r *OfferingRow) any { return r.Terms().Kind }}

	offerID       = &offerCol{Field: "id", Value: func(r *OfferingRow) any { return r.ID }}
	offerProvider = &offerCol{Field: "provider", Value: func(r *OfferingRow) any { return r.Provider }}
	offerCloud    = &offerCol{Field: "cloud", Format: "-", Value: func(r *OfferingRow) any { return string(r.Cloud) }}
	offerRegion   = &offerCol{Field: "region", Value: func(r *OfferingRow) any { return r.Region }}
	offerZone     = &offerCol{Field: "zone", Value: func(r *OfferingRow) any { return OptString(r.Zone) }}
	offerType     = &offerCol{Field: "instance_type", Value: func(r *OfferingRow) any { return r.InstanceType }}
	offerModel    = &offerCol{Field: "gpu_model", Value: func(r *OfferingRow) any { return r.GPU.Model }}
	offerCount    = &offerCol{Field: "instance_count", Value: func(r *OfferingRow) any { return r.InstanceCount }}
	offerEnd      = &offerCol{Field: "end", Format: "local", Value: func(r *OfferingRow) any { return r.End.UTC() }}
	offerLength   = &offerCol{Field: "length", TableOnly: true, Value: func(r *OfferingRow) any {
		d := time.Duration(r.HeldHours() * float64(time.Hour)).Round(time.Minute)
		s := fmt.Sprintf("%dh", int(d.Hours()))
		if m := int(d.Minutes()) % 60; m != 0 {
			s += fmt.Sprintf("%02dm", m)
		}
		if r.FlexLength {
			s += FlexMark
		}
		return s
	}}
	offerCurrency = &offerCol{Field: "currency", Format: "-", Value: func(r *OfferingRow) any {
		if r.Currency == "" {
			return "USD"
		}
		return r.Currency
	}}
	offerSegments = &offerCol{Field: "segments", Format: "-", Value: func(r *OfferingRow) any { return segmentsOf(r.Offering) }}
)

// FlexMark follows a length other than the one asked for.
const FlexMark = "~"

// BlocksView: at 80 columns what decides a booking stays.
var BlocksView = []*offerCol{OfferPerGPU, OfferUpfront, OfferHourly, OfferInstances, OfferGPUs, OfferWhere, OfferStart, OfferHours,
	OfferAlt, OfferAltTotal, OfferAltPool, OfferKind}

// Offerings is in DESIGN.md's field order.
var Offerings = []*offerCol{offerID, offerProvider, offerCloud, offerRegion, offerZone, offerType, offerModel, OfferGPUs, offerCount,
	OfferStart, offerEnd, OfferHours, offerLength, OfferUpfront, OfferHourly, offerCurrency, OfferPerGPU, OfferKind, offerSegments}

func (r *OfferingRow) alt(v float64) string {
	if r.Alt.Pool == nil {
		return "-"
	}
	return Money(v)
}

func hoursCell(r *OfferingRow) string {
	h := r.HeldHours()
	s := strconv.FormatFloat(h, 'f', 1, 64)
	if h == math.Trunc(h) {
		s = strconv.FormatFloat(h, 'f', 0, 64)
	}
	if r.FlexLength {
		s += FlexMark
	}
	return s
}

type Segment struct {
	InstanceType  string    `json:"instance_type"`
	InstanceCount int       `json:"instance_count"`
	Zone          *string   `json:"zone"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
}

// Segments is its JSON text in CSV.
type Segments []Segment

func (l Segments) String() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode([]Segment(l)); err != nil {
		return ""
	}
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

func segmentsOf(o domain.Offering) Segments {
	var out Segments
	for _, s := range o.Windows() {
		out = append(out, Segment{InstanceType: s.InstanceType, InstanceCount: s.InstanceCount, Zone: OptString(s.Zone),
			Start: s.Start.UTC(), End: s.End.UTC()})
	}
	return out
}
