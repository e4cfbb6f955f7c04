package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
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
	if rs.types != nil && now.Sub(rs.typesAt) < cacheTTL {
		t := rs.types
		rs.mu.Unlock()
		return t, true
	}
	rs.mu.Unlock()
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
	name := string(it.InstanceType)
	spec := domain.GPUSpec{}
	if it.GpuInfo != nil && len(it.GpuInfo.Gpus) > 0 {
		g := it.GpuInfo.Gpus[0]
		if model, ok := domain.NormalizeGPUModel(awssdk.ToString(g.Name)); ok {
			spec.Model = model
		}
		for _, d := range it.GpuInfo.Gpus {
			spec.Count += float64(awssdk.ToInt32(d.Count))
		}
		if g.MemoryInfo != nil {
			spec.MemoryGiB = float64(awssdk.ToInt32(g.MemoryInfo.SizeInMiB)) / 1024
		}
	}
	if e, ok := domain.LookupGPU(name); ok && e.Cloud == domain.CloudAWS {
		spec = e.GPU
	} else if it.GpuInfo == nil || len(it.GpuInfo.Gpus) == 0 {
		return GPUType{}, false
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
