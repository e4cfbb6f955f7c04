package aws

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// cacheTTL keeps slow-moving facts: instance types, on-demand prices, the advisor file.
const cacheTTL = 24 * time.Hour

// GPUType is a GPU instance type of a region.
type GPUType struct {
	InstanceType string         `json:"instance_type"`
	GPU          domain.GPUSpec `json:"gpu"`
}

type typesFile struct {
	Fetched time.Time `json:"fetched"`
	Types   []GPUType `json:"types"`
}

// gpuTypes returns the region's GPU types from memory, the data dir (a day), or DescribeInstanceTypes.
func (p *Provider) gpuTypes(ctx context.Context, region string) ([]GPUType, error) {
	if t, ok := p.cachedGPUTypes(region); ok {
		return t, nil
	}
	types, err := p.describeGPUTypes(ctx, region)
	if err != nil {
		return nil, err
	}
	now := p.opt.Now()
	if path := p.cachePath("instance-types-" + region + ".json"); path != "" {
		if err := writeJSON(path, typesFile{Fetched: now, Types: types}); err != nil {
			p.opt.Logger.Warn("cache instance types", "region", region, "err", err)
		}
	}
	p.regionState(region).setTypes(types, now)
	return types, nil
}

func (p *Provider) cachedGPUTypes(region string) ([]GPUType, bool) {
	rs := p.regionState(region)
	now := p.opt.Now()
	rs.mu.Lock()
	t, at := rs.types, rs.typesAt
	rs.mu.Unlock()
	if t != nil && now.Sub(at) < cacheTTL {
		return t, true
	}
	var f typesFile
	if path := p.cachePath("instance-types-" + region + ".json"); path != "" && readJSON(path, &f) == nil && now.Sub(f.Fetched) < cacheTTL && f.Types != nil {
		rs.setTypes(f.Types, f.Fetched)
		return f.Types, true
	}
	return nil, false
}

// gpuFamilies are the NVIDIA families as the instance-type filter takes them
// ("c5*" is the API Reference's example).
var gpuFamilies = []string{"p*", "g*"}

// describeGPUTypes pages the GPU families (one page, not ten); the catalog wins
// where it knows a type (AWS says 44.7 GiB for the L40S's 48 GB).
func (p *Provider) describeGPUTypes(ctx context.Context, region string) ([]GPUType, error) {
	pg := ec2.NewDescribeInstanceTypesPaginator(p.client(region), &ec2.DescribeInstanceTypesInput{
		MaxResults: awssdk.Int32(100),
		Filters:    []ec2types.Filter{{Name: awssdk.String("instance-type"), Values: gpuFamilies}},
	})
	var out []GPUType
	for page, err := range pages(ctx, pg, p.ec2Call(region, "DescribeInstanceTypes")) {
		if err != nil {
			return nil, explain(fmt.Errorf("describe instance types in %s: %w", region, err))
		}
		for _, it := range page.InstanceTypes {
			if t, ok := gpuTypeOf(it); ok {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceType < out[j].InstanceType })
	if out == nil {
		out = []GPUType{}
	}
	return out, nil
}

// catalogGPUTypes are the catalog's AWS types, asked before DescribeInstanceTypes answers.
func catalogGPUTypes() []GPUType {
	var out []GPUType
	for _, e := range domain.CatalogEntries(domain.CloudAWS) {
		out = append(out, GPUType{InstanceType: e.InstanceType, GPU: e.GPU})
	}
	return out
}

// gpuTypeOf reads a type's GPUs; false without GPUs or for ones gpumarket does not compare.
func gpuTypeOf(it ec2types.InstanceTypeInfo) (GPUType, bool) {
	name, spec := string(it.InstanceType), domain.GPUSpec{}
	if e, ok := domain.LookupGPU(name); ok && e.Cloud == domain.CloudAWS {
		spec = e.GPU
	} else if it.GpuInfo != nil && len(it.GpuInfo.Gpus) > 0 {
		g := it.GpuInfo.Gpus[0]
		spec.Model, _ = domain.NormalizeGPUModel(awssdk.ToString(g.Name))
		for _, d := range it.GpuInfo.Gpus {
			spec.Count += float64(awssdk.ToInt32(d.Count))
		}
		if g.MemoryInfo != nil {
			spec.MemoryGiB = float64(awssdk.ToInt32(g.MemoryInfo.SizeInMiB)) / 1024
		}
	}
	if spec.Model == "" || spec.Count <= 0 {
		return GPUType{}, false
	}
	return GPUType{InstanceType: name, GPU: spec}, true
}

func (p *Provider) cachePath(name string) string {
	if p.opt.DataDir == "" {
		return ""
	}
	return filepath.Join(p.opt.DataDir, "aws", name)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

// writeFile replaces a cache file atomically: a crash leaves no half file.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// onDemandPrice is one cached list price; nil USD caches a miss (not sold on demand).
type onDemandPrice struct {
	USD     *float64  `json:"usd"`
	Fetched time.Time `json:"fetched"`
}

type onDemandCache struct {
	mu     sync.Mutex
	prices map[string]map[string]onDemandPrice // region → type → price, the data dir's at first
	// failure is why the last Price List query failed, for the source's note.
	failure string
}

// cachedOnDemand returns a type's cached price (nil: none) and whether it is fresh.
func (p *Provider) cachedOnDemand(region, instanceType string) (*float64, bool) {
	c := &p.onDemandC
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.prices[region][instanceType]
	if !ok || p.opt.Now().Sub(e.Fetched) >= cacheTTL {
		return nil, false
	}
	return e.USD, true
}

func (p *Provider) missingOnDemand(region string, want []string) []string {
	return slices.DeleteFunc(slices.Clone(want), func(t string) bool {
		_, fresh := p.cachedOnDemand(region, t)
		return fresh
	})
}

type onDemandJob struct {
	done  chan struct{}
	asked map[string][]string // region → the types it asks for
}

// notAsked returns the region's types the job does not ask for; a nil job asks none.
func (j *onDemandJob) notAsked(region string, types []string) []string {
	if j == nil {
		return types
	}
	return slices.DeleteFunc(slices.Clone(types), func(t string) bool { return slices.Contains(j.asked[region], t) })
}

func (j *onDemandJob) wait(ctx context.Context) {
	if j == nil {
		return
	}
	select {
	case <-j.done:
	case <-ctx.Done():
	}
}

// startOnDemand asks the Price List, beside the history, for the prices the
// cache lacks; nil when it has them all.
func (p *Provider) startOnDemand(ctx context.Context, wg *sync.WaitGroup, regions []string, want func(region string) []string) *onDemandJob {
	missing := map[string][]string{}
	for _, r := range regions {
		if m := p.missingOnDemand(r, want(r)); len(m) > 0 {
			missing[r] = m
		}
	}
	if len(missing) == 0 {
		return nil
	}
	job := &onDemandJob{done: make(chan struct{}), asked: missing}
	wg.Go(func() {
		defer close(job.done)
		p.fetchOnDemand(ctx, missing)
	})
	return job
}

// onDemandFilters select a Linux, shared, on-demand product; marketoption tells
// it from a block type's second product at the block's price.
var onDemandFilters = []pricingtypes.Filter{
	termMatch("operatingSystem", "Linux"), termMatch("tenancy", "Shared"), termMatch("preInstalledSw", "NA"),
	termMatch("capacitystatus", "Used"), termMatch("marketoption", "OnDemand"), termMatch("locationType", "AWS Region"),
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String(field), Value: awssdk.String(value)}
}

// maxFilterValue is the Price List's 1,024-character filter value, less a margin.
const maxFilterValue = 1000

// fetchOnDemand asks the Price List for the types' on-demand prices and caches
// them a day, misses as nil. GetProducts takes ANY_OF "multiple values as a
// comma-separated string" (API Reference, Filter), so a few one-page queries
// cover every region. A failed query is said in the note, never cached.
func (p *Provider) fetchOnDemand(ctx context.Context, missing map[string][]string) {
	types := slices.Concat(slices.Collect(maps.Values(missing))...)
	slices.Sort(types)
	type query struct {
		regions, types []string
		found          map[[2]string]*float64
		err            error
	}
	var queries []query
	for _, ts := range chunkList(slices.Compact(types), 100, maxFilterValue) {
		for _, rs := range chunkList(slices.Sorted(maps.Keys(missing)), max(1, 100/len(ts)), maxFilterValue) {
			queries = append(queries, query{regions: rs, types: ts})
		}
	}
	fanout.Each(len(queries), 0, func(i int) {
		queries[i].found, queries[i].err = p.getProducts(ctx, queries[i].regions, queries[i].types)
	})
	now := p.opt.Now()
	var firstErr error
	failedRegions := map[string]bool{}
	c := &p.onDemandC
	c.mu.Lock()
	fetched := false
	for _, q := range queries {
		switch {
		case q.err != nil && ctx.Err() != nil:
			continue // the fetch ended: nothing failed
		case q.err != nil:
			firstErr = cmp.Or(firstErr, q.err)
			for _, reg := range q.regions {
				failedRegions[reg] = true
			}
			continue
		}
		for _, reg := range q.regions {
			if c.prices[reg] == nil {
				c.prices[reg] = map[string]onDemandPrice{}
			}
			// Types another region wanted are as fresh: keep them.
			for _, t := range q.types {
				c.prices[reg][t] = onDemandPrice{USD: q.found[[2]string{reg, t}], Fetched: now}
				fetched = true
			}
		}
	}
	if ctx.Err() == nil {
		c.failure = ""
	}
	if firstErr != nil {
		c.failure = fmt.Sprintf("on-demand prices unknown in %d region(s): %s", len(failedRegions), shortCause(firstErr))
		p.opt.Logger.Info("price list", "regions", len(failedRegions), "err", firstErr) // the note says it to the user
	}
	var err error
	if path := p.cachePath("on-demand.json"); path != "" && fetched {
		err = writeJSON(path, c.prices)
	}
	c.mu.Unlock()
	if err != nil {
		p.opt.Logger.Warn("cache on-demand prices", "err", err)
	}
}

// onDemandNote says why on-demand prices are unknown, or "".
func (p *Provider) onDemandNote() string {
	c := &p.onDemandC
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

// getProducts pages one Price List query and returns each (region, type)'s hourly price.
func (p *Provider) getProducts(ctx context.Context, regions, types []string) (map[[2]string]*float64, error) {
	filters := append([]pricingtypes.Filter{
		{Type: pricingtypes.FilterTypeAnyOf, Field: awssdk.String("regionCode"), Value: awssdk.String(strings.Join(regions, ","))},
		{Type: pricingtypes.FilterTypeAnyOf, Field: awssdk.String("instanceType"), Value: awssdk.String(strings.Join(types, ","))},
	}, onDemandFilters...)
	pg := pricing.NewGetProductsPaginator(p.pricing, &pricing.GetProductsInput{
		ServiceCode: awssdk.String("AmazonEC2"), FormatVersion: awssdk.String("aws_v1"),
		MaxResults: awssdk.Int32(100), Filters: filters,
	})
	out := map[[2]string]*float64{}
	for page, err := range pages(ctx, pg, p.pricingCall()) {
		if err != nil {
			return nil, fmt.Errorf("get on-demand prices of %d types in %s: %w", len(types), strings.Join(regions, ","), explain(err))
		}
		for _, doc := range page.PriceList {
			region, typ, usd, err := parsePriceListProduct([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("on-demand prices in %s: %w", strings.Join(regions, ","), err)
			}
			k := [2]string{region, typ}
			if usd != nil || out[k] == nil {
				out[k] = usd
			}
		}
	}
	return out, nil
}

// chunkList splits items into runs of at most n whose comma-joined length is within maxLen.
func chunkList(items []string, n, maxLen int) [][]string {
	var out [][]string
	for len(items) > 0 {
		k, size := 1, len(items[0])
		for k < min(n, len(items)) && size+1+len(items[k]) <= maxLen {
			size += 1 + len(items[k])
			k++
		}
		out = append(out, items[:k])
		items = items[k:]
	}
	return out
}

type priceListProduct struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parsePriceListProduct reads a product's region, type and hourly USD (nil: none).
func parsePriceListProduct(doc []byte) (region, instanceType string, usd *float64, err error) {
	var p priceListProduct
	if err := json.Unmarshal(doc, &p); err != nil {
		return "", "", nil, fmt.Errorf("price list product: %w", err)
	}
	usd, err = onDemandOf(p)
	return p.Product.Attributes["regionCode"], p.Product.Attributes["instanceType"], usd, err
}

func onDemandOf(p priceListProduct) (*float64, error) {
	if p.Product.Attributes == nil {
		return nil, fmt.Errorf("price list product: no product attributes")
	}
	for _, term := range p.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if dim.Unit != "Hrs" {
				continue
			}
			s, ok := dim.PricePerUnit["USD"]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("price list product: USD price %q is not a non-negative number", s)
			}
			// Zero is the placeholder for a product not sold on demand.
			if v == 0 {
				continue
			}
			return &v, nil
		}
	}
	return nil, nil
}
