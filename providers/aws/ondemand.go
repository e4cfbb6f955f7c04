package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// onDemandPrice is one cached list price; USD is nil when the Price List
// has none (the type is not sold on demand there), so the miss is cached
// too.
type onDemandPrice struct {
	USD     *float64  `json:"usd"`
	Fetched time.Time `json:"fetched"`
}

type onDemandCache struct {
	mu     sync.Mutex
	loaded bool
	prices map[string]map[string]onDemandPrice // region → type → price
}

// onDemand returns the Linux, shared-tenancy on-demand price of each type
// in a region (nil where unknown), from the day-long cache or the Price
// List API. A Price List failure is logged and leaves prices unknown: it
// must not hide the spot market.
func (p *Provider) onDemand(ctx context.Context, region string, types []string) map[string]*float64 {
	c := &p.onDemandC
	path := p.cachePath("on-demand.json")
	now := p.opt.Now()
	c.mu.Lock()
	if !c.loaded {
		c.loaded = true
		c.prices = map[string]map[string]onDemandPrice{}
		if path != "" {
			_ = readJSON(path, &c.prices)
		}
	}
	out := map[string]*float64{}
	var missing []string
	for _, t := range types {
		if e, ok := c.prices[region][t]; ok && now.Sub(e.Fetched) < cacheTTL {
			out[t] = e.USD
		} else {
			missing = append(missing, t)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type result struct {
		typ string
		usd *float64
		err error
	}
	results := make(chan result, len(missing))
	sem := make(chan struct{}, 4)
	for _, t := range missing {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			usd, err := p.fetchOnDemand(ctx, region, t)
			results <- result{t, usd, err}
		}()
	}
	fetched := map[string]onDemandPrice{}
	var failed []string
	var firstErr error
	for range missing {
		r := <-results
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
			}
			failed = append(failed, r.typ)
			continue
		}
		out[r.typ] = r.usd
		fetched[r.typ] = onDemandPrice{USD: r.usd, Fetched: now}
	}
	if len(failed) > 0 {
		// One line per region, not per type: when the Price List API is
		// out of reach every type fails the same way.
		p.opt.Logger.Warn("on-demand prices unknown", "region", region, "types", len(failed), "err", shortCause(firstErr))
	}
	if len(fetched) > 0 {
		c.mu.Lock()
		if c.prices[region] == nil {
			c.prices[region] = map[string]onDemandPrice{}
		}
		for t, e := range fetched {
			c.prices[region][t] = e
		}
		var err error
		if path != "" {
			err = writeJSON(path, c.prices)
		}
		c.mu.Unlock()
		if err != nil {
			p.opt.Logger.Warn("cache on-demand prices", "err", err)
		}
	}
	return out
}

func (p *Provider) fetchOnDemand(ctx context.Context, region, instanceType string) (*float64, error) {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String(field), Value: awssdk.String(value)}
	}
	in := &pricing.GetProductsInput{
		ServiceCode:   awssdk.String("AmazonEC2"),
		FormatVersion: awssdk.String("aws_v1"),
		MaxResults:    awssdk.Int32(100),
		Filters: []pricingtypes.Filter{
			term("instanceType", instanceType), term("regionCode", region), term("operatingSystem", "Linux"),
			term("tenancy", "Shared"), term("preInstalledSw", "NA"), term("capacitystatus", "Used"),
			// GPU types sold as capacity blocks have a second product
			// that matches every filter above at the block's price.
			term("marketoption", "OnDemand"),
		},
	}
	pg := pricing.NewGetProductsPaginator(p.pricing, in)
	for pg.HasMorePages() {
		// Two attempts: a list price that cannot be had quickly is shown
		// as unknown rather than holding up the spot market.
		page, err := pg.NextPage(ctx, func(o *pricing.Options) { o.RetryMaxAttempts = 2 })
		if err != nil {
			return nil, fmt.Errorf("get on-demand price of %s in %s: %w", instanceType, region, explain(err))
		}
		for _, doc := range page.PriceList {
			usd, err := ParsePriceListOnDemand([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("on-demand price of %s in %s: %w", instanceType, region, err)
			}
			if usd != nil {
				return usd, nil
			}
		}
	}
	return nil, nil
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

// ParsePriceListOnDemand reads one Price List product document (a
// PriceList member of GetProducts) and returns its hourly on-demand USD
// price, or nil when the product has no hourly on-demand term. A
// document that is not a product, or a price that is not a non-negative
// number, is an error.
func ParsePriceListOnDemand(doc []byte) (*float64, error) {
	var p priceListProduct
	if err := json.Unmarshal(doc, &p); err != nil {
		return nil, fmt.Errorf("price list product: %w", err)
	}
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
			// A zero price is the Price List's placeholder for a
			// product not sold on demand, not a free instance.
			if v == 0 {
				continue
			}
			return &v, nil
		}
	}
	return nil, nil
}
