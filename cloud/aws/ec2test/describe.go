package ec2test

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The market data actions (DescribeRegions, DescribeInstanceTypes,
// DescribeSpotPriceHistory, GetSpotPlacementScores). They follow the EC2
// API Reference and its documented examples; each says which.

// describeRegions answers with the account's regions, as the API
// Reference's DescribeRegions example does (regionName, regionEndpoint,
// optInStatus for each).
func (s *Server) describeRegions(f url.Values, reqID string) ([]byte, *apiError) {
	var regs []node
	for _, name := range s.order {
		regs = append(regs, el("", tx("regionName", name), tx("regionEndpoint", "ec2."+name+".amazonaws.com"),
			tx("optInStatus", "opt-in-not-required")))
	}
	return document("DescribeRegions", reqID, items("regionInfo", regs)), nil
}

// describeInstanceTypes pages through the region's types as the API
// Reference documents DescribeInstanceTypes: MaxResults 5 to 100 (a page
// holds at most 100, so a real region's ~900 types take ten pages),
// InstanceType.N (an unknown name is InvalidInstanceType) and the
// instance-type filter with wildcards ("c5*" is the Reference's own
// example). Types without GPUs carry no gpuInfo, as in real answers.
func (s *Server) describeInstanceTypes(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	want := list(f, "InstanceType")
	for _, w := range want {
		known := false
		for _, it := range rd.InstanceTypes {
			known = known || it.Name == w
		}
		if !known {
			return nil, &apiError{http.StatusBadRequest, "InvalidInstanceType", "The following supplied instance types do not exist: [" + w + "]"}
		}
	}
	patterns := filters(f)["instance-type"]
	var sel []InstanceType
	for _, it := range rd.InstanceTypes {
		if (len(want) == 0 || contains(want, it.Name)) && (len(patterns) == 0 || matchAnyWildcard(patterns, it.Name)) {
			sel = append(sel, it)
		}
	}
	lo, hi, tok, err := s.page(f, len(sel), 100, 5, 100)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, it := range sel[lo:hi] {
		classes := []node{tx("", "on-demand"), tx("", "spot")}
		if it.CapacityBlock {
			classes = append(classes, tx("", "capacity-block"))
		}
		kids := []node{tx("instanceType", it.Name), tx("currentGeneration", "true"),
			el("vCpuInfo", num("defaultVCpus", it.VCPUs)), el("memoryInfo", num("sizeInMiB", it.MemoryMiB)),
			items("supportedUsageClasses", classes)}
		if it.GPUCount > 0 {
			kids = append(kids, el("gpuInfo",
				items("gpus", []node{el("", tx("name", it.GPUName), tx("manufacturer", it.GPUMaker), num("count", it.GPUCount),
					el("memoryInfo", num("sizeInMiB", it.GPUMemoryMiB)))}),
				num("totalGpuMemoryInMiB", it.GPUCount*it.GPUMemoryMiB)))
		}
		out = append(out, el("", kids...))
	}
	return document("DescribeInstanceTypes", reqID, withToken([]node{items("instanceTypeSet", out)}, tok)...), nil
}

// describeSpotPriceHistory answers as AWS documents it: the changes within
// (StartTime, EndTime], newest first, plus for each type and zone the
// change in force at StartTime (the last at or before it, with its own
// older timestamp: in the AWS CLI's documented example, a query from
// 2014-01-06T07:08:09 answers an item of 2014-01-05T11:28:26). It takes
// InstanceType.N, ProductDescription.N, AvailabilityZone or
// AvailabilityZoneId (not both) and the documented filters instance-type,
// availability-zone, availability-zone-id and product-description, with
// wildcards. MaxResults is 5 to 1000; the last page carries an empty
// nextToken ("an empty string or null when there are no more items").
// A region with OmitZoneIDs leaves availabilityZoneId out, as the
// documented example (and older answers) do.
//
// It returns a renderer, and needs not hold the server's lock (maxPage is
// its MaxPage): the selection has its own.
func (s *Server) describeSpotPriceHistory(rd *Region, f url.Values, reqID string, maxPage int) (func() []byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	start, hasStart, err := timeParam(f, "StartTime")
	if err != nil {
		return nil, err
	}
	end, hasEnd, err := timeParam(f, "EndTime")
	if err != nil {
		return nil, err
	}
	if hasStart && hasEnd && end.Before(start) {
		return nil, badParam("EndTime %s is before StartTime %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	flt := filters(f)
	types := list(f, "InstanceType")
	products := append(list(f, "ProductDescription"), flt["product-description"]...)
	zone, zoneID := f.Get("AvailabilityZone"), f.Get("AvailabilityZoneId")
	if zone != "" && zoneID != "" {
		return nil, badParam("Either AvailabilityZone or AvailabilityZoneId can be specified, but not both")
	}
	for _, z := range rd.Zones {
		if zoneID != "" && z.ID == zoneID {
			zone = z.Name
		}
	}
	if zoneID != "" && zone == "" {
		zone = "-" // an id of no zone here selects nothing
	}
	empty := func() []byte {
		return document("DescribeSpotPriceHistory", reqID, items("spotPriceHistorySet", nil), tx("nextToken", ""))
	}
	if len(products) > 0 && !matchAnyWildcard(products, "Linux/UNIX") {
		return empty, nil
	}
	selKey := rd.Name + "|" + strings.Join(types, ",") + "|" + zone + "|" + f.Get("StartTime") + "|" + f.Get("EndTime") + "|" + strconv.Itoa(len(rd.Prices))
	s.selMu.Lock()
	sel, cached := s.selections[selKey]
	s.selMu.Unlock()
	if !cached {
		sel = selectHistory(rd, types, zone, start, hasStart, end, hasEnd)
		s.selMu.Lock()
		if s.selections == nil {
			s.selections = map[string][]int{}
		}
		s.selections[selKey] = sel
		s.selMu.Unlock()
	}
	// The filters narrow what the parameters selected; the selection
	// cache is keyed by the parameters only.
	typePat, zonePat, zoneIDPat := flt["instance-type"], flt["availability-zone"], flt["availability-zone-id"]
	zoneIDs := map[string]string{}
	for _, z := range rd.Zones {
		zoneIDs[z.Name] = z.ID
	}
	if len(typePat)+len(zonePat)+len(zoneIDPat) > 0 {
		kept := make([]int, 0, len(sel))
		for _, i := range sel {
			p := rd.Prices[i]
			if (len(typePat) == 0 || matchAnyWildcard(typePat, p.InstanceType)) &&
				(len(zonePat) == 0 || matchAnyWildcard(zonePat, p.Zone)) &&
				(len(zoneIDPat) == 0 || matchAnyWildcard(zoneIDPat, zoneIDs[p.Zone])) {
				kept = append(kept, i)
			}
		}
		sel = kept
	}
	lo, hi, tok, perr := pageOf(f, len(sel), 1000, 5, 1000, maxPage)
	if perr != nil {
		return nil, perr
	}
	page := sel[lo:hi]
	omitIDs := rd.OmitZoneIDs
	return func() []byte { return renderHistory(rd, page, zoneIDs, omitIDs, tok, reqID) }, nil
}

// renderHistory writes a DescribeSpotPriceHistory answer straight into a
// buffer: a page of 1,000 items is the fake's hottest path.
func renderHistory(rd *Region, page []int, zoneIDs map[string]string, omitIDs bool, token, reqID string) []byte {
	var b bytes.Buffer
	b.Grow(420*len(page) + 512)
	b.WriteString(xml.Header)
	b.WriteString(`<DescribeSpotPriceHistoryResponse xmlns="` + Namespace + `">`)
	b.WriteString("\n    <requestId>" + reqID + "</requestId>\n    <spotPriceHistorySet>")
	var num []byte
	for _, i := range page {
		p := rd.Prices[i]
		b.WriteString("\n        <item>\n            <instanceType>")
		_ = xml.EscapeText(&b, []byte(p.InstanceType))
		b.WriteString("</instanceType>\n            <productDescription>Linux/UNIX</productDescription>\n            <spotPrice>")
		num = strconv.AppendFloat(num[:0], p.USD, 'f', 6, 64)
		b.Write(num)
		b.WriteString("</spotPrice>\n            <timestamp>")
		num = p.At.UTC().AppendFormat(num[:0], "2006-01-02T15:04:05.000Z")
		b.Write(num)
		b.WriteString("</timestamp>\n            <availabilityZone>")
		_ = xml.EscapeText(&b, []byte(p.Zone))
		b.WriteString("</availabilityZone>")
		if !omitIDs {
			b.WriteString("\n            <availabilityZoneId>" + zoneIDs[p.Zone] + "</availabilityZoneId>")
		}
		b.WriteString("\n        </item>")
	}
	b.WriteString("\n    </spotPriceHistorySet>\n    <nextToken>" + token + "</nextToken>\n</DescribeSpotPriceHistoryResponse>")
	return b.Bytes()
}

// selectHistory picks the history entries of a query, newest first.
func selectHistory(rd *Region, types []string, zone string, start time.Time, hasStart bool, end time.Time, hasEnd bool) []int {
	type pz struct{ t, z string }
	before := map[pz]int{}
	want := map[string]bool{}
	for _, t := range types {
		want[t] = true
	}
	var sel []int
	for i, p := range rd.Prices {
		if (len(types) > 0 && !want[p.InstanceType]) || (zone != "" && zone != p.Zone) {
			continue
		}
		if hasEnd && p.At.After(end) {
			continue
		}
		if hasStart && !p.At.After(start) {
			k := pz{p.InstanceType, p.Zone}
			if j, ok := before[k]; !ok || rd.Prices[j].At.Before(p.At) {
				before[k] = i
			}
			continue
		}
		sel = append(sel, i)
	}
	for _, i := range before {
		sel = append(sel, i)
	}
	sort.SliceStable(sel, func(a, b int) bool {
		pa, pb := rd.Prices[sel[a]], rd.Prices[sel[b]]
		if !pa.At.Equal(pb.At) {
			return pa.At.After(pb.At)
		}
		if pa.InstanceType != pb.InstanceType {
			return pa.InstanceType < pb.InstanceType
		}
		return pa.Zone < pb.Zone
	})
	return sel
}

// getSpotPlacementScores scores the set of instance types in each
// requested region (or zone, with SingleAvailabilityZone): the set's score
// is its best member's, as a fleet may use any of them. As the model
// says: with "one or two instance types … the returned placement score
// will always be low" (1 here), and the answer holds "the Spot placement
// score for the top 10 Regions or Availability Zones" only, best first.
func (s *Server) getSpotPlacementScores(f url.Values, reqID string) ([]byte, *apiError) {
	if s.DenyPlacementScores {
		return nil, &apiError{http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation. User: arn:aws:iam::123456789012:user/test is not authorized to perform: ec2:GetSpotPlacementScores"}
	}
	if err := dryRun(f); err != nil {
		return nil, err
	}
	types := list(f, "InstanceType")
	if len(types) == 0 {
		return nil, badParam("InstanceType: at least one is required")
	}
	if f.Get("TargetCapacity") == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter TargetCapacity"}
	}
	regions := list(f, "RegionName")
	if len(regions) == 0 {
		regions = s.order
	}
	single := f.Get("SingleAvailabilityZone") == "true"
	type scored struct {
		region, zone string
		score        int
	}
	var all []scored
	for _, name := range regions {
		rd := s.regions[name]
		if rd == nil {
			continue
		}
		best := 0
		for _, z := range rd.Zones {
			score := 0
			for _, t := range types {
				if v := rd.Scores[t][z.ID]; v > score {
					score = v
				}
			}
			if score == 0 {
				continue
			}
			if len(types) < 3 {
				score = 1
			}
			if single {
				all = append(all, scored{name, z.ID, score})
			}
			best = max(best, score)
		}
		if !single && best > 0 {
			all = append(all, scored{name, "", best})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	all = all[:min(len(all), 10)]
	var out []node
	for _, x := range all {
		kids := []node{tx("region", x.region)}
		if x.zone != "" {
			kids = append(kids, tx("availabilityZoneId", x.zone))
		}
		out = append(out, el("", append(kids, num("score", x.score))...))
	}
	return document("GetSpotPlacementScores", reqID, items("spotPlacementScoreSet", out)), nil
}

// matchAnyWildcard reports whether v matches one of the patterns, with
// EC2's filter wildcards: * any run of characters, ? exactly one.
func matchAnyWildcard(patterns []string, v string) bool {
	for _, p := range patterns {
		if wildcard(p, v) {
			return true
		}
	}
	return false
}

func wildcard(p, v string) bool {
	// Iterative matching with one backtrack point for the last *.
	pi, vi, star, mark := 0, 0, -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == v[vi]):
			pi++
			vi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
