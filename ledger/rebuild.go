package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// costUnknownNote marks a row whose cost the cloud's record did not say.
const costUnknownNote = "cost unknown: re-created from the cloud's record"

// RebuildReport is what Rebuild did.
type RebuildReport struct {
	Asked []string
	// Created are the rows re-created from the clouds' records.
	Created []Entry
	// Present counts records the ledger already had a row for.
	Present int
	// Failed maps a provider to why its records could not be read.
	Failed map[string]error
}

// Rebuild re-creates the rows the clouds' tags show and the ledger lacks; it is idempotent.
func (s *Service) Rebuild(ctx context.Context) (RebuildReport, error) {
	rep := RebuildReport{Failed: map[string]error{}}
	for _, name := range s.names {
		rl, ok := s.provs[name].(domain.RecordLister)
		if !ok {
			continue
		}
		rep.Asked = append(rep.Asked, name)
		cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
		recs, err := rl.ListRecords(cctx, time.Time{})
		cancel()
		if err != nil {
			rep.Failed[name] = err
			continue
		}
		for _, rec := range recs {
			if rec.Provider == "" {
				rec.Provider = name
			}
			have, err := s.recorded(ctx, rec)
			if err != nil {
				return rep, err
			}
			if have {
				rep.Present++
				continue
			}
			row, err := s.recreate(ctx, rec, domain.Offering{}, fmt.Sprintf("re-created by `gpumarket ledger --rebuild` from %s's tags", name))
			var dup *DuplicateError
			switch {
			case errors.As(err, &dup):
				rep.Present++
			case err != nil:
				return rep, err
			default:
				rep.Created = append(rep.Created, row)
			}
		}
	}
	return rep, nil
}

// recorded reports whether the ledger has a row for a cloud's record.
func (s *Service) recorded(ctx context.Context, rec domain.CloudRecord) (bool, error) {
	found := func(err error) (bool, error) {
		if err == nil {
			return true, nil
		}
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if rec.Ref != "" {
		if ok, err := found(get(s.st.Get(ctx, rec.Ref))); ok || err != nil {
			return ok, err
		}
	}
	if rec.ProviderRef != "" {
		if ok, err := found(get(s.st.FindByRef(ctx, rec.ProviderRef))); ok || err != nil {
			return ok, err
		}
	}
	if Booked(rec.Kind) && rec.OfferingID != "" {
		return found(get(s.st.Holder(ctx, rec.Kind, rec.OfferingID)))
	}
	return false, nil
}

func get(_ Entry, err error) error { return err }

// recreate writes the row of a cloud's record, under its tagged id when free.
func (s *Service) recreate(ctx context.Context, rec domain.CloudRecord, o domain.Offering, why string) (Entry, error) {
	now := s.opt.Now()
	r := Entry{
		Kind: rec.Kind, Provider: rec.Provider, Cloud: string(rec.Cloud), Region: rec.Region, Zone: rec.Zone,
		InstanceType: rec.InstanceType, InstanceCount: rec.InstanceCount, Start: rec.Start, End: rec.End,
		State: rec.State, ProviderRef: rec.ProviderRef, Actor: rec.Actor, CreatedAt: rec.CreatedAt, Note: why,
	}
	if rec.Ref != "" {
		if _, err := s.st.Get(ctx, rec.Ref); errors.Is(err, ErrNotFound) {
			r.ID = rec.Ref
		}
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if e, ok := domain.LookupGPU(firstType(rec.InstanceType)); ok {
		r.GPUCount = e.GPU.Count * float64(rec.InstanceCount)
		if r.Cloud == "" {
			r.Cloud = string(e.Cloud)
		}
	}
	r.CostUSD, r.USDHour = math.NaN(), math.NaN()
	if math.IsNaN(rec.CostUSD) || rec.CostUSD < 0 {
		r.CostNote = costUnknownNote
	} else if r.Kind == KindFleet {
		r.USDHour = rec.CostUSD
	} else {
		r.CostUSD = rec.CostUSD
	}
	// A record shows it exists: never pending or unknown in the ledger.
	if r.State == "" || r.State == StatePending || r.State == StateUnknown {
		r.State = StateScheduled
		if r.Kind == KindFleet {
			r.State = StateActive
		}
	}
	var req any
	switch r.Kind {
	case KindFleet:
		r.IdemKey = rec.Ref
		if r.IdemKey == "" {
			r.IdemKey = "cloud:" + rec.ProviderRef
		}
		if r.Start.IsZero() {
			r.Start = r.CreatedAt
		}
		req = domain.FleetSpec{Provider: r.Provider, Region: r.Region, InstanceTypes: strings.Split(r.InstanceType, ","),
			TargetCapacity: r.InstanceCount, ClientToken: r.IdemKey, Actor: r.Actor}
	default:
		if o.ID == "" {
			e, _ := domain.LookupGPU(r.InstanceType)
			o = domain.Offering{ID: rec.OfferingID, Provider: r.Provider, Cloud: domain.Cloud(r.Cloud), Region: r.Region,
				Zone: r.Zone, InstanceType: r.InstanceType, GPU: e.GPU, InstanceCount: r.InstanceCount, Start: r.Start, End: r.End,
				UpfrontUSD: knownOr0(r.CostUSD), Currency: "USD", Kind: r.Kind, StartsOnPurchase: r.Kind == KindReservation}
		}
		r.IdemKey = rec.OfferingID
		if r.IdemKey == "" {
			r.IdemKey = "cloud:" + rec.ProviderRef
		}
		req = o
		r = advance(r, now)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return r, fmt.Errorf("re-create the row of %s: %w", rec.ProviderRef, err)
	}
	r.Request = raw
	out, err := s.intent(ctx, r, nil)
	if err != nil {
		return out, fmt.Errorf("re-create the row of %s: %w", rec.ProviderRef, err)
	}
	s.opt.Logger.Info("ledger row re-created from the cloud's record", "row", out.ID, "ref", out.ProviderRef, "why", why)
	return out, nil
}

func firstType(types string) string {
	t, _, _ := strings.Cut(types, ",")
	return t
}

// beat beats the row's heartbeat until stop: other hosts read it.
func (s *Service) beat(ctx context.Context, id string) (stop func()) {
	every := s.opt.Heartbeat
	if every <= 0 {
		every = HeartbeatEvery
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := s.st.Beat(context.WithoutCancel(ctx), id, s.opt.Now()); err != nil {
					s.opt.Logger.Warn("heartbeat of a call in flight", "row", id, "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// knownOr0 is a figure for JSON, which cannot hold NaN.
func knownOr0(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}
