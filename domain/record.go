package domain

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// Tags on every purchase and launch make the cloud a second record (docs/DESIGN.md, "Money").
const (
	TagRef      = "gpumarket:ref"
	TagActor    = "gpumarket:actor" // "alice@host", "ssh:SHA256:… alice"
	TagTool     = "gpumarket:tool"
	TagOffering = "gpumarket:offering"
	ToolName    = "gpumarket" // TagTool's value
)

// Tags returns the tags of a purchase or launch, without empty values (clouds refuse them).
func Tags(ref, actor, offeringID string) map[string]string {
	out := map[string]string{TagTool: ToolName}
	for k, v := range map[string]string{TagRef: ref, TagActor: actor, TagOffering: offeringID} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// ErrOfferingGone is matched by RefreshOffering's error when the offering is off sale.
var ErrOfferingGone = errors.New("the offering is no longer on sale")

// OfferingRefresher describes an offering again as sold now, so only fresh terms are bought.
type OfferingRefresher interface {
	RefreshOffering(ctx context.Context, o Offering) (Offering, error)
}

// CloudRecord is what a cloud's tags show of one thing gpumarket bought or launched.
type CloudRecord struct {
	Kind          string
	Ref           string // TagRef's; "" when untagged
	Actor         string
	OfferingID    string
	ProviderRef   string // "cr-…", "fleet-…", an Azure id
	Provider      string
	Cloud         Cloud
	Region, Zone  string
	InstanceType  string
	InstanceCount int
	Start, End    time.Time
	CostUSD       float64 // NaN if unknown
	State         string  // a ledger state
	CreatedAt     time.Time
}

// RecordLister lists what a provider shows of gpumarket's doings since a time, from tags.
type RecordLister interface {
	ListRecords(ctx context.Context, since time.Time) ([]CloudRecord, error)
}

// SortRecords orders records by creation, then by the provider's id.
func SortRecords(rs []CloudRecord) {
	slices.SortStableFunc(rs, func(a, b CloudRecord) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ProviderRef, b.ProviderRef))
	})
}
