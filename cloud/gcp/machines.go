package gcp

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/domain"
)

// machine is one GPU machine in one zone: an accelerator-optimised type, or N1 with cards.
type machine struct {
	Zone, Type string // Type as gpumarket names it ("n1-standard-8+1xt4")
	Base       string // the machine type ("n1-standard-8")
	CPUs       int64
	MemGiB     float64
	GPU        domain.GPUSpec
	// Accel and AccelCount are the cards attached to an N1 type.
	Accel      string
	AccelCount int64
	// Family and GPUSKU key the catalog's SKUs (prices.go).
	Family string
	GPUSKU string
}

// families map a type prefix to its core/RAM SKU family and GPU SKU words.
var families = []struct{ prefix, family, gpu string }{
	{"a3-highgpu-", "a3", "h100 80gb"},
	{"a3-megagpu-", "a3plus", "h100 80gb mega"},
	{"a3-ultragpu-", "a3ultra", "h200 141gb"},
	{"a2-highgpu-", "a2", "tesla a100"},
	{"a2-megagpu-", "a2", "tesla a100"},
	{"a2-ultragpu-", "a2", "a100 80gb"},
	{"g2-standard-", "g2", "l4"},
	{"n1-standard-", "n1predefined", ""},
}

// accelerators are the cards gpumarket attaches to N1 types.
var accelerators = []struct{ name, short, gpu string }{
	{"nvidia-tesla-t4", "t4", "tesla t4"},
	{"nvidia-tesla-v100", "v100", "tesla v100"},
}

// ParseType splits a Google GPU machine name: "a3-highgpu-8g", or
// "n1-standard-8+1xt4" (base type, count, accelerator type).
func ParseType(t string) (base string, count int64, accel string, err error) {
	base, cards, ok := strings.Cut(t, "+")
	if !ok {
		return t, 0, "", nil
	}
	n, short, ok := strings.Cut(cards, "x")
	c, cerr := strconv.ParseInt(n, 10, 64)
	if ok && cerr == nil && c > 0 {
		for _, a := range accelerators {
			if a.short == short {
				return base, c, a.name, nil
			}
		}
	}
	return "", 0, "", fmt.Errorf("machine %q: want a machine type, or an N1 type with cards such as n1-standard-8+1xt4 (t4 or v100)", t)
}

func familyOf(base string) (family, gpu string, ok bool) {
	for _, f := range families {
		if strings.HasPrefix(base, f.prefix) {
			return f.family, f.gpu, true
		}
	}
	return "", "", false
}

// machineFilter selects the GPU families and the N1 types paired with cards.
const machineFilter = `name eq "(a2|a3|g2)-.*|n1-standard-(4|8|16|32|64)"`

// machines lists every zone's GPU machines, kept for ListTTL.
func (p *Provider) machines(ctx context.Context) ([]machine, error) {
	return keep(p, &p.types, func() ([]machine, error) { return p.listMachines(ctx) })
}

// keep returns *c while younger than ListTTL, else what load returns, kept.
func keep[T any](p *Provider, c *cached[T], load func() (T, error)) (T, error) {
	p.mu.Lock()
	v, at := c.v, c.at
	p.mu.Unlock()
	if !at.IsZero() && p.now().Sub(at) < p.opt.ListTTL {
		return v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	p.mu.Lock()
	*c = cached[T]{v, p.now()}
	p.mu.Unlock()
	return v, nil
}

// zoneOf is an aggregated list item's zone, else its scope's ("zones/us-central1-a").
func zoneOf(zone, scope string) string {
	if zone == "" {
		return path.Base(scope)
	}
	return path.Base(zone)
}

func (p *Provider) listMachines(ctx context.Context) ([]machine, error) {
	types := map[string][]*compute.MachineType{} // by zone
	err := p.compute.MachineTypes.AggregatedList(p.project).Filter(machineFilter).
		Pages(ctx, func(l *compute.MachineTypeAggregatedList) error {
			for scope, sl := range l.Items {
				for _, mt := range sl.MachineTypes {
					types[zoneOf(mt.Zone, scope)] = append(types[zoneOf(mt.Zone, scope)], mt)
				}
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list machine types", err)
	}
	cards := map[string]map[string]bool{} // zone → accelerator types
	err = p.compute.AcceleratorTypes.AggregatedList(p.project).Filter(`name eq "nvidia-tesla-(t4|v100)"`).
		Pages(ctx, func(l *compute.AcceleratorTypeAggregatedList) error {
			for scope, sl := range l.Items {
				for _, at := range sl.AcceleratorTypes {
					z := zoneOf(at.Zone, scope)
					if cards[z] == nil {
						cards[z] = map[string]bool{}
					}
					cards[z][at.Name] = true
				}
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list accelerator types", err)
	}
	var out []machine
	for zone, mts := range types {
		for _, mt := range mts {
			if mt.Deprecated != nil && mt.Deprecated.State != "" && mt.Deprecated.State != "ACTIVE" {
				continue
			}
			out = append(out, machinesOf(zone, mt, cards[zone])...)
		}
	}
	slices.SortFunc(out, func(a, b machine) int {
		return cmp.Or(strings.Compare(a.Zone, b.Zone), strings.Compare(a.Type, b.Type))
	})
	return out, nil
}

// machinesOf returns a type's GPU machines in a zone: itself if it carries
// known GPUs, or each catalog pairing of an N1 type with a card there.
func machinesOf(zone string, mt *compute.MachineType, cards map[string]bool) []machine {
	family, gpu, ok := familyOf(mt.Name)
	if !ok {
		return nil
	}
	m := machine{Zone: zone, Base: mt.Name, CPUs: mt.GuestCpus, MemGiB: float64(mt.MemoryMb) / 1024, Family: family, GPUSKU: gpu}
	if family != "n1predefined" {
		e, ok := domain.LookupGPU(mt.Name)
		if !ok || len(mt.Accelerators) == 0 {
			return nil
		}
		m.Type, m.GPU = mt.Name, e.GPU
		return []machine{m}
	}
	var out []machine
	for _, a := range accelerators {
		if !cards[a.name] {
			continue
		}
		for _, n := range []int64{1, 2, 4, 8} {
			t := fmt.Sprintf("%s+%dx%s", mt.Name, n, a.short)
			e, ok := domain.LookupGPU(t)
			if !ok {
				continue
			}
			c := m
			c.Type, c.GPU, c.Accel, c.AccelCount, c.GPUSKU = t, e.GPU, a.name, n, a.gpu
			out = append(out, c)
		}
	}
	return out
}
