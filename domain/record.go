package domain

import (
	"context"
	"errors"
	"time"
)

// The second record: every purchase and launch carries tags (where the
// cloud's API takes them) naming the ledger row it was made for, who made
// it and with what, so that the cloud itself remembers which of its
// resources gpumarket made. A lost or emptied ledger can be rebuilt from
// them (`gpumarket ledger --rebuild`), and a purchase is not repeated for
// an offering that a tagged reservation already came from.
const (
	// TagRef carries the ledger row's id (AWS has used this key since the
	// first version; Azure spells its tags with dashes: TagRefAzure).
	TagRef = "gpumarket:ref"
	// TagActor carries who acted ("alice@host", "ssh:SHA256:… alice").
	TagActor = "gpumarket:actor"
	// TagTool says what made the resource; its value is ToolName.
	TagTool = "gpumarket:tool"
	// TagOffering carries the offering id a purchase was made from.
	TagOffering = "gpumarket:offering"
	// ToolName is TagTool's value.
	ToolName = "gpumarket"
)

// Tags returns the tags of a purchase or launch: the ledger row, the
// actor, the tool, and the offering when there is one. Empty values are
// left out (the clouds refuse empty tag values in places).
func Tags(ref, actor, offeringID string) map[string]string {
	out := map[string]string{TagTool: ToolName}
	for k, v := range map[string]string{TagRef: ref, TagActor: actor, TagOffering: offeringID} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// ErrOfferingGone is matched by RefreshOffering's answer when the offering
// is no longer on sale: nothing may be bought under its terms.
var ErrOfferingGone = errors.New("the offering is no longer on sale")

// OfferingRefresher is a Booker that can describe an offering again, as
// the cloud sells it now, right before it is bought: a cached search can
// be an hour old, and the price, dates or size may have changed since.
// The booking service buys only at terms it has just refreshed, and if
// they changed it shows the new terms and asks again.
type OfferingRefresher interface {
	// RefreshOffering returns the offering with the terms it is sold on
	// now (same ID where the cloud has ids), or an error matching
	// ErrOfferingGone when it is no longer on sale.
	RefreshOffering(ctx context.Context, o Offering) (Offering, error)
}

// CloudRecord is what a cloud shows of one thing gpumarket bought or
// launched, read back from its tags: enough to write its ledger row again.
// Unknown values are zero (CostUSD: NaN).
type CloudRecord struct {
	// Kind is KindBlock, KindReservation or KindFleet.
	Kind string
	// Ref is the ledger row id of TagRef; "" when untagged.
	Ref        string
	Actor      string
	OfferingID string
	// ProviderRef is the cloud's id ("cr-…", "fleet-…", an Azure id).
	ProviderRef   string
	Provider      string
	Cloud         Cloud
	Region, Zone  string
	InstanceType  string
	InstanceCount int
	Start, End    time.Time
	CostUSD       float64
	// State is a ledger state.
	State     string
	CreatedAt time.Time
}

// RecordLister is a provider that can list what it shows of gpumarket's
// purchases and launches, from their tags, created at or after since.
type RecordLister interface {
	ListRecords(ctx context.Context, since time.Time) ([]CloudRecord, error)
}
