package gcp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/domain"
)

var _ domain.RecordLister = (*Provider)(nil)

// TagCost carries a future reservation's cost in USD: Compute shows none, and a rebuilt ledger needs it.
const TagCost = "gpumarket:cost-usd"

// ListRecords lists what gpumarket bought or launched since, so a lost ledger
// can be rebuilt: future reservations named gpumarket-… (tags in the
// description), and one fleet per label of its VMs (cost NaN; one whose VMs
// are all gone is not found).
func (p *Provider) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	var out []domain.CloudRecord
	err := p.compute.FutureReservations.AggregatedList(p.project).Filter(`name eq "gpumarket-.*"`).
		Pages(ctx, func(l *compute.FutureReservationsAggregatedListResponse) error {
			for scope, sl := range l.Items {
				for _, fr := range sl.FutureReservations {
					if rec, ok := p.reservationRecord(scope, fr); ok && !rec.CreatedAt.Before(since) {
						out = append(out, rec)
					}
				}
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list gpumarket's future reservations", err)
	}
	fleets := map[string][]*compute.Instance{}
	err = p.compute.Instances.AggregatedList(p.project).Filter(fmt.Sprintf(`labels.%s = "%s"`, labelTool, domain.ToolName)).
		Pages(ctx, func(l *compute.InstanceAggregatedList) error {
			for _, sl := range l.Items {
				for _, in := range sl.Instances {
					if id := in.Labels[labelFleet]; id != "" {
						fleets[id] = append(fleets[id], in)
					}
				}
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list gpumarket's VMs", err)
	}
	for id, vms := range fleets {
		if rec := fleetRecord(id, vms); !rec.CreatedAt.Before(since) {
			out = append(out, rec)
		}
	}
	domain.SortRecords(out)
	return out, nil
}

// reservationRecord reads a future reservation; false if its description is not gpumarket's.
func (p *Provider) reservationRecord(scope string, fr *compute.FutureReservation) (domain.CloudRecord, bool) {
	tags := readTags(fr.Description)
	if tags[domain.TagTool] != domain.ToolName && tags[domain.TagRef] == "" {
		return domain.CloudRecord{}, false
	}
	zone := path.Base(fr.Zone)
	if fr.Zone == "" {
		zone = strings.TrimPrefix(scope, "zones/")
	}
	b := p.bookingOf(fr, zone, math.NaN())
	rec := domain.CloudRecord{
		Kind: domain.KindCalendar, Ref: tags[domain.TagRef], Actor: tags[domain.TagActor], OfferingID: tags[domain.TagOffering],
		ProviderRef: b.ProviderRef, Provider: Name, Cloud: domain.CloudGCP, Region: b.Region, Zone: zone,
		InstanceType: b.InstanceType, InstanceCount: b.InstanceCount, Start: b.Start, End: b.End,
		CostUSD: math.NaN(), State: b.State,
	}
	rec.CreatedAt, _ = time.Parse(time.RFC3339, fr.CreationTimestamp)
	rec.CreatedAt = rec.CreatedAt.UTC()
	if usd, err := strconv.ParseFloat(tags[TagCost], 64); err == nil && usd >= 0 && !math.IsInf(usd, 0) {
		rec.CostUSD = usd
	}
	return rec, true
}

// fleetRecord makes a fleet's record from its VMs, in order of creation.
func fleetRecord(id string, vms []*compute.Instance) domain.CloudRecord {
	created := func(in *compute.Instance) time.Time {
		t, _ := time.Parse(time.RFC3339, in.CreationTimestamp)
		return t.UTC()
	}
	slices.SortFunc(vms, func(a, b *compute.Instance) int {
		return cmp.Or(created(a).Compare(created(b)), strings.Compare(a.Name, b.Name))
	})
	rec := domain.CloudRecord{Kind: domain.KindFleet, ProviderRef: id, Provider: Name, Cloud: domain.CloudGCP,
		InstanceCount: len(vms), CostUSD: math.NaN(), State: "ended"}
	var types, zones []string
	for _, in := range vms {
		zone := path.Base(in.Zone)
		if rec.Region == "" {
			rec.Region = regionOf(zone)
		}
		if t := created(in); !t.IsZero() && (rec.Start.IsZero() || t.Before(rec.Start)) {
			rec.Start = t
		}
		if !slices.Contains(zones, zone) {
			zones = append(zones, zone)
		}
		if t := typeOf(in); !slices.Contains(types, t) {
			types = append(types, t)
		}
		switch in.Status {
		case "PROVISIONING", "STAGING", "RUNNING":
			rec.State = "active"
		}
		if s := in.Scheduling; s != nil && s.TerminationTime != "" {
			if t, err := time.Parse(time.RFC3339, s.TerminationTime); err == nil {
				rec.End = t.UTC()
			}
		}
	}
	rec.CreatedAt = rec.Start
	rec.InstanceType, rec.Zone = strings.Join(types, ","), strings.Join(zones, ",")
	// The description keeps row id and actor as written; labels lower-case them.
	tags := readTags(vms[0].Description)
	rec.Ref, rec.Actor = tags[domain.TagRef], tags[domain.TagActor]
	if rec.Ref == "" {
		rec.Ref = vms[0].Labels[labelRef]
	}
	if rec.Actor == "" {
		rec.Actor = vms[0].Labels[labelActor]
	}
	return rec
}

// describeTags writes tags in a description (reservations take no labels):
// key=value by spaces, values with spaces or quotes Go-quoted.
func describeTags(tags map[string]string) string {
	keys := slices.Sorted(maps.Keys(tags))
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := tags[k]
		if v == "" || strings.ContainsAny(v, " \t\n\"") {
			v = strconv.Quote(v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

// readTags reads what describeTags wrote; what is not key=value ends it.
func readTags(desc string) map[string]string {
	out := map[string]string{}
	s := strings.TrimLeft(desc, " ")
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			break
		}
		v := rest
		if q, err := strconv.QuotedPrefix(rest); err == nil && rest[0] == '"' {
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else if i := strings.IndexByte(rest, ' '); i >= 0 {
			v, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		out[k] = v
		s = strings.TrimLeft(rest, " ")
	}
	return out
}

// reservationTags are domain.Tags and the cost.
func reservationTags(req domain.BookRequest) map[string]string {
	tags := domain.Tags(req.Ref, req.Actor, req.Offering.ID)
	if usd := req.Offering.UpfrontUSD; usd >= 0 && !math.IsNaN(usd) && !math.IsInf(usd, 0) {
		tags[TagCost] = strconv.FormatFloat(usd, 'f', -1, 64)
	}
	return tags
}
