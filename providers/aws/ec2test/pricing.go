package ec2test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// regionLocation is the Price List API's "location" of a region.
var regionLocation = map[string]string{"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)",
	"eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)"}

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

type getProductsInput struct {
	ServiceCode   string          `json:"ServiceCode"`
	Filters       []pricingFilter `json:"Filters"`
	FormatVersion string          `json:"FormatVersion"`
	NextToken     string          `json:"NextToken"`
	MaxResults    int             `json:"MaxResults"`
}

// servePricing answers AWSPriceListService.GetProducts (awsJson1_1) with one
// product per matching instance type, in the Price List's own shape: each
// PriceList member is a JSON document in a string.
func (s *Server) servePricing(w http.ResponseWriter, r *http.Request, target string) {
	region := signedRegion(r.Header)
	var in getProductsInput
	err := json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	action := target
	if i := len("AWSPriceListService."); len(target) > i {
		action = target[i:]
	}
	s.calls = append(s.calls, Call{Action: "pricing:" + action, Region: region})
	jsonErr := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Errortype", typ)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	if fault, ok := s.matchFault("pricing:"+action, region); ok {
		if fault.Body != "" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = w.Write([]byte(fault.Body))
			return
		}
		jsonErr(fault.Status, fault.Code, fault.Message)
		return
	}
	if target != "AWSPriceListService.GetProducts" {
		jsonErr(http.StatusBadRequest, "UnknownOperationException", "unknown operation "+target)
		return
	}
	if err != nil {
		jsonErr(http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	if in.ServiceCode != "AmazonEC2" {
		jsonErr(http.StatusBadRequest, "InvalidParameterException", "ServiceCode "+in.ServiceCode+" is not served here")
		return
	}
	var list []string
	for _, name := range s.order {
		rd := s.regions[name]
		for _, it := range rd.InstanceTypes {
			od, ok := rd.OnDemand[it.Name]
			if !ok {
				continue
			}
			// As in the real Price List, a type sold as capacity blocks
			// has a second product that shares every attribute but
			// marketoption, at another price; it comes first here, so a
			// client that does not filter on marketoption reads it.
			for _, p := range []struct {
				market string
				usd    float64
			}{{"CapacityBlock", od * 0.61}, {"OnDemand", od}} {
				attrs := productAttributes(name, it, p.market)
				if matchesFilters(attrs, in.Filters) {
					list = append(list, productJSON(attrs, p.usd))
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"FormatVersion": "aws_v1", "PriceList": list})
}

// productAttributes are a Linux, shared-tenancy product's attributes.
func productAttributes(region string, it InstanceType, market string) map[string]string {
	return map[string]string{
		"instanceType": it.Name, "regionCode": region, "location": regionLocation[region],
		"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
		"marketoption": market, "vcpu": strconv.Itoa(it.VCPUs), "servicecode": "AmazonEC2",
	}
}

// matchesFilters applies GetProducts' TERM_MATCH filters: every filtered
// attribute must be present with that value.
func matchesFilters(attrs map[string]string, filters []pricingFilter) bool {
	for _, f := range filters {
		if v, ok := attrs[f.Field]; !ok || v != f.Value {
			return false
		}
	}
	return true
}

// productJSON renders one Price List product with its on-demand term, as
// AWS writes it (SKU-keyed maps, prices as decimal strings).
func productJSON(attrs map[string]string, od float64) string {
	name := attrs["instanceType"]
	sku := fmt.Sprintf("SKU%08X", len(name)*7919+int(od*1000)+len(attrs["marketoption"]))
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": "Compute Instance",
			"sku":           sku,
			"attributes":    attrs,
		},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{
				sku + ".JRTCKXETXF": map[string]any{
					"offerTermCode": "JRTCKXETXF", "sku": sku,
					"priceDimensions": map[string]any{
						sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{
							"unit": "Hrs", "description": fmt.Sprintf("$%.4f per On Demand Linux %s Instance Hour", od, name),
							"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(od, 'f', 10, 64)},
						},
					},
				},
			},
		},
		"version":         "20250601000000",
		"publicationDate": "2025-06-01T00:00:00Z",
	}
	b, _ := json.Marshal(doc)
	return string(b)
}
