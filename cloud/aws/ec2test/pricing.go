package ec2test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

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
// product per matching instance type and region, in the Price List's own
// shape: each PriceList member is a JSON document in a string. It follows
// the Billing and Cost Management API Reference: MaxResults 1 to 100
// (default 100) with a NextToken, and the filter types TERM_MATCH, EQUALS,
// CONTAINS, ANY_OF and NONE_OF, the last two taking "multiple values as a
// comma-separated string", as in the Reference's own example "Compute
// optimized, GPU instance, Micro instances" (API_pricing_Filter).
func (s *Server) servePricing(w http.ResponseWriter, r *http.Request, target string) {
	region := signedRegion(r.Header)
	var in getProductsInput
	err := json.NewDecoder(r.Body).Decode(&in)
	action := target
	if i := len("AWSPriceListService."); len(target) > i {
		action = target[i:]
	}
	params := url.Values{"ServiceCode": {in.ServiceCode}}
	for _, f := range in.Filters {
		params.Add("Filter."+f.Field, f.Type+":"+f.Value)
	}
	if in.NextToken != "" {
		params.Set("NextToken", in.NextToken)
	}
	jsonErr := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Errortype", typ)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	s.mu.Lock()
	s.seq++
	s.calls = append(s.calls, Call{Action: "pricing:" + action, Region: region, Params: params})
	fault, faulty := s.matchFault("pricing:"+action, region)
	if !faulty && s.EnforceRateLimits && !s.take("pricing:"+action, region) {
		fault, faulty = Fault{Status: http.StatusBadRequest, Code: "ThrottlingException", Message: "Rate exceeded"}, true
	}
	s.calls[len(s.calls)-1].Faulted = faulty
	if faulty {
		s.mu.Unlock()
		switch {
		case fault.Hang:
			hang(r, fault)
		case fault.Drop:
			s.writeFault(w, fault, "")
		case fault.Body != "" || fault.Raw:
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			if fault.Status != 0 {
				w.WriteHeader(fault.Status)
			}
			_, _ = w.Write([]byte(fault.Body))
		default:
			jsonErr(fault.Status, fault.Code, fault.Message)
		}
		return
	}
	defer s.mu.Unlock()
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
	for _, f := range in.Filters {
		switch f.Type {
		case "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF":
		default:
			jsonErr(http.StatusBadRequest, "InvalidParameterException", "Filter type "+f.Type+" is not one of TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF")
			return
		}
		if len(f.Value) > 1024 {
			jsonErr(http.StatusBadRequest, "ValidationException", "Filter value of "+f.Field+" is longer than 1024 characters")
			return
		}
	}
	max := 100
	if in.MaxResults != 0 {
		if in.MaxResults < 1 || in.MaxResults > 100 {
			jsonErr(http.StatusBadRequest, "ValidationException", "MaxResults must be between 1 and 100")
			return
		}
		max = in.MaxResults
	}
	if s.MaxPage > 0 && max > s.MaxPage {
		max = s.MaxPage
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
			markets := []struct {
				market string
				usd    float64
			}{{"OnDemand", od}}
			if it.CapacityBlock {
				markets = append([]struct {
					market string
					usd    float64
				}{{"CapacityBlock", od * 0.61}}, markets...)
			}
			for _, p := range markets {
				attrs := productAttributes(name, it, p.market)
				if matchesFilters(attrs, in.Filters) {
					list = append(list, productJSON(attrs, p.usd))
				}
			}
		}
	}
	start := 0
	if in.NextToken != "" {
		off, err := strconv.Atoi(strings.TrimPrefix(in.NextToken, "pl-"))
		if err != nil || !strings.HasPrefix(in.NextToken, "pl-") || off < 0 || off > len(list) {
			jsonErr(http.StatusBadRequest, "InvalidNextTokenException", "The pagination token is invalid")
			return
		}
		start = off
	}
	end := min(start+max, len(list))
	answer := map[string]any{"FormatVersion": "aws_v1", "PriceList": list[start:end]}
	if end < len(list) {
		answer["NextToken"] = "pl-" + strconv.Itoa(end)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(answer)
}

// productAttributes are a Linux, shared-tenancy product's attributes, with
// the instanceFamily the Price List gives each family ("GPU instance" for
// the P and G families).
func productAttributes(region string, it InstanceType, market string) map[string]string {
	family := "General purpose"
	switch {
	case it.GPUCount > 0:
		family = "GPU instance"
	case strings.HasPrefix(it.Name, "c"):
		family = "Compute optimized"
	case strings.HasPrefix(it.Name, "r"):
		family = "Memory optimized"
	}
	attrs := map[string]string{
		"instanceType": it.Name, "regionCode": region, "location": regionNames[region].location, "locationType": "AWS Region",
		"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
		"marketoption": market, "vcpu": strconv.Itoa(it.VCPUs), "servicecode": "AmazonEC2", "instanceFamily": family,
	}
	if it.GPUCount > 0 {
		attrs["gpu"] = strconv.Itoa(it.GPUCount)
		attrs["gpuMemory"] = strconv.Itoa(it.GPUMemoryMiB/1024) + " GB"
	}
	return attrs
}

// matchesFilters applies GetProducts' filters: every filtered attribute
// must be present and match (a NONE_OF also passes a product without the
// attribute).
func matchesFilters(attrs map[string]string, filters []pricingFilter) bool {
	for _, f := range filters {
		v, ok := attrs[f.Field]
		if f.Field == "ServiceCode" {
			v, ok = attrs["servicecode"], true
		}
		var match bool
		switch f.Type {
		case "TERM_MATCH", "EQUALS":
			match = ok && v == f.Value
		case "CONTAINS":
			match = ok && strings.Contains(v, f.Value)
		case "ANY_OF":
			match = ok && containsTrimmed(f.Value, v)
		case "NONE_OF":
			match = !ok || !containsTrimmed(f.Value, v)
		}
		if !match {
			return false
		}
	}
	return true
}

// containsTrimmed reports whether a comma list ("a, b,c") holds v.
func containsTrimmed(commaList, v string) bool {
	for _, x := range strings.Split(commaList, ",") {
		if strings.TrimSpace(x) == v {
			return true
		}
	}
	return false
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
