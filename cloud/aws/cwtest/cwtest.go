// Package cwtest is a local CloudWatch endpoint for tests: GetMetricData
// in the wire protocol aws-sdk-go-v2's CloudWatch client speaks since
// v1.7x — Smithy RPC v2 CBOR (POST
// /service/GraniteServiceVersion20100801/operation/GetMetricData, header
// Smithy-Protocol: rpc-v2-cbor, CBOR bodies with timestamps as tag 1
// epoch seconds; https://smithy.io/2.0/additional-specs/protocols/smithy-rpc-v2.html),
// so the real client runs against it.
//
// The answers follow the GetMetricData API reference
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html)
// and the AWS CLI's documented example (`aws cloudwatch get-metric-data`,
// Example 1: MetricDataResults of Id, Label, Timestamps, Values and
// StatusCode "Complete", and Messages), including what that example
// hides: results newest first unless ScanBy is TimestampAscending, a page
// cut with StatusCode "PartialData" and a NextToken, a metric that has no
// datapoints (an empty result, still "Complete"), a query the caller may
// not read ("Forbidden"), and throttling (400, __type Throttling, and the
// awsQuery-compatible X-Amzn-Query-Error header).
package cwtest

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go/encoding/cbor"
)

// OperationPath is where the client posts GetMetricData.
const OperationPath = "/service/GraniteServiceVersion20100801/operation/GetMetricData"

// Point is one raw datapoint of a metric.
type Point struct {
	At    time.Time
	Value float64
}

type series struct {
	namespace, name string
	dims            map[string]string
	points          []Point
}

// Query is one MetricDataQuery as the server received it.
type Query struct {
	ID, Expression          string
	Namespace, MetricName   string
	Dimensions              map[string]string
	Period                  int
	Stat                    string
	ReturnData              bool
	StartTime, EndTime      time.Time
	ScanBy                  string
	HadNextToken            bool
	ProtocolHeader, Content string
}

// Server is the fake CloudWatch. It is safe for concurrent use.
type Server struct {
	mu     sync.Mutex
	series []series
	// PageSize is the most datapoints one answer carries over all its
	// results (default 100,800, GetMetricData's own limit).
	PageSize int
	throttle int
	deny     map[string]bool // namespaces answered Forbidden
	fail     string          // every call fails with this error code
	calls    [][]Query
	// Now is the server's clock (default time.Now): SEARCH and the
	// retention of fine periods are relative to it.
	Now func() time.Time
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// New makes an empty server.
func New() *Server { return &Server{deny: map[string]bool{}} }

// Add stores raw datapoints of a metric.
func (s *Server) Add(namespace, name string, dims map[string]string, pts ...Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.series {
		x := &s.series[i]
		if x.namespace == namespace && x.name == name && sameDims(x.dims, dims) {
			x.points = append(x.points, pts...)
			return
		}
	}
	s.series = append(s.series, series{namespace: namespace, name: name, dims: dims, points: append([]Point(nil), pts...)})
}

// Throttle makes the next n calls fail with Throttling.
func (s *Server) Throttle(n int) { s.mu.Lock(); s.throttle = n; s.mu.Unlock() }

// Deny answers the namespace's queries with StatusCode Forbidden.
func (s *Server) Deny(namespace string) { s.mu.Lock(); s.deny[namespace] = true; s.mu.Unlock() }

// FailWith makes every call fail with the error code (AccessDenied, say);
// "" stops.
func (s *Server) FailWith(code string) { s.mu.Lock(); s.fail = code; s.mu.Unlock() }

// Calls returns the queries of every call received, in order.
func (s *Server) Calls() [][]Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]Query(nil), s.calls...)
}

func sameDims(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ServeHTTP answers GetMetricData; anything else is a 404 with
// UnknownOperationException, as the protocol says.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/service/GraniteServiceVersion20100801/operation/") {
		writeErr(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+r.URL.Path, "")
		return
	}
	if r.URL.Path != OperationPath {
		writeErr(w, http.StatusNotFound, "UnknownOperationException", "this fake answers GetMetricData only", "")
		return
	}
	if r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" || r.Header.Get("Content-Type") != "application/cbor" {
		writeErr(w, http.StatusBadRequest, "InvalidParameterValue", "want Smithy-Protocol rpc-v2-cbor and a CBOR body", "")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "InvalidParameterValue", err.Error(), "")
		return
	}
	v, err := cbor.Decode(body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "InvalidParameterValue", "body is not CBOR: "+err.Error(), "")
		return
	}
	in, ok := v.(cbor.Map)
	if !ok {
		writeErr(w, http.StatusBadRequest, "InvalidParameterValue", "body is not a CBOR map", "")
		return
	}
	qs, start, end, scan, token, perr := parseInput(in)
	if perr != "" {
		writeErr(w, http.StatusBadRequest, "InvalidParameterValue", perr, "")
		return
	}
	for i := range qs {
		qs[i].ProtocolHeader, qs[i].Content = r.Header.Get("Smithy-Protocol"), r.Header.Get("Content-Type")
		qs[i].HadNextToken = token != ""
	}
	s.mu.Lock()
	s.calls = append(s.calls, qs)
	if s.throttle > 0 {
		s.throttle--
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, "Throttling", "Rate exceeded", "Throttling;Sender")
		return
	}
	if s.fail != "" {
		code := s.fail
		s.mu.Unlock()
		writeErr(w, http.StatusForbidden, code, "User is not authorized to perform: cloudwatch:GetMetricData", code+";Sender")
		return
	}
	results := s.evaluate(qs, start, end, scan)
	pageSize := s.PageSize
	s.mu.Unlock()
	if pageSize <= 0 {
		pageSize = 100800
	}
	skip := 0
	if token != "" {
		if skip, err = strconv.Atoi(strings.TrimPrefix(token, "page-")); err != nil {
			writeErr(w, http.StatusBadRequest, "InvalidNextToken", "bad NextToken", "")
			return
		}
	}
	// The page carries datapoints skip … skip+pageSize, counted over the
	// results in order.
	var out cbor.List
	seen, taken := 0, 0
	for _, res := range results {
		r := res
		var ts, vals cbor.List
		for k := range res.at {
			if seen >= skip && taken < pageSize {
				ts = append(ts, &cbor.Tag{ID: 1, Value: cbor.Float64(float64(res.at[k].UnixMilli()) / 1000)})
				vals = append(vals, cbor.Float64(res.vals[k]))
				taken++
			}
			seen++
		}
		status := res.status
		if seen > skip+pageSize && status == "Complete" {
			status = "PartialData"
		}
		item := cbor.Map{"Id": cbor.String(r.id), "Label": cbor.String(r.label), "StatusCode": cbor.String(status),
			"Timestamps": ts, "Values": vals}
		if res.status == "Forbidden" {
			item["Messages"] = cbor.List{cbor.Map{"Code": cbor.String("Forbidden"), "Value": cbor.String("not authorized for this namespace")}}
		}
		out = append(out, item)
	}
	resp := cbor.Map{"MetricDataResults": out, "Messages": cbor.List{}}
	if seen > skip+pageSize {
		resp["NextToken"] = cbor.String(fmt.Sprintf("page-%d", skip+pageSize))
	}
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	w.Write(cbor.Encode(resp))
}

func writeErr(w http.ResponseWriter, status int, code, msg, queryErr string) {
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	if queryErr != "" {
		w.Header().Set("X-Amzn-Query-Error", queryErr)
	}
	w.WriteHeader(status)
	w.Write(cbor.Encode(cbor.Map{"__type": cbor.String("com.amazonaws.cloudwatch#" + code), "message": cbor.String(msg)}))
}

func str(v cbor.Value) string {
	if s, ok := v.(cbor.String); ok {
		return string(s)
	}
	return ""
}

func parseInput(in cbor.Map) (qs []Query, start, end time.Time, scan, token, problem string) {
	var err error
	if start, err = cbor.AsTime(in["StartTime"]); err != nil {
		return nil, start, end, "", "", "StartTime: want a tag-1 timestamp"
	}
	if end, err = cbor.AsTime(in["EndTime"]); err != nil {
		return nil, start, end, "", "", "EndTime: want a tag-1 timestamp"
	}
	if !end.After(start) {
		return nil, start, end, "", "", "The parameter StartTime must be less than the parameter EndTime."
	}
	scan, token = str(in["ScanBy"]), str(in["NextToken"])
	list, ok := in["MetricDataQueries"].(cbor.List)
	if !ok || len(list) == 0 || len(list) > 500 {
		return nil, start, end, "", "", "MetricDataQueries: want 1 to 500 queries"
	}
	for _, item := range list {
		m, ok := item.(cbor.Map)
		if !ok {
			return nil, start, end, "", "", "MetricDataQueries: want maps"
		}
		q := Query{ID: str(m["Id"]), Expression: str(m["Expression"]), ReturnData: true, StartTime: start, EndTime: end, ScanBy: scan}
		if b, ok := m["ReturnData"].(cbor.Bool); ok {
			q.ReturnData = bool(b)
		}
		if ms, ok := m["MetricStat"].(cbor.Map); ok {
			q.Stat = str(ms["Stat"])
			p, _ := cbor.AsInt32(ms["Period"])
			q.Period = int(p)
			if mm, ok := ms["Metric"].(cbor.Map); ok {
				q.Namespace, q.MetricName = str(mm["Namespace"]), str(mm["MetricName"])
				q.Dimensions = map[string]string{}
				if dl, ok := mm["Dimensions"].(cbor.List); ok {
					for _, d := range dl {
						if dm, ok := d.(cbor.Map); ok {
							q.Dimensions[str(dm["Name"])] = str(dm["Value"])
						}
					}
				}
			}
		}
		if hasExpr := q.Expression != ""; q.ID == "" || hasExpr == q.MetricStat() {
			return nil, start, end, "", "", fmt.Sprintf("query %q: want an Id and exactly one of MetricStat or Expression", q.ID)
		}
		if q.Expression == "" && (q.Period <= 0 || q.Period%60 != 0 && q.Period != 1 && q.Period != 5 && q.Period != 10 && q.Period != 30) {
			return nil, start, end, "", "", fmt.Sprintf("query %s: Period %d: want 1, 5, 10, 30 or a multiple of 60", q.ID, q.Period)
		}
		qs = append(qs, q)
	}
	return qs, start, end, scan, token, ""
}

// MetricStat reports whether the query names a metric (not an
// expression).
func (q Query) MetricStat() bool { return q.MetricName != "" }

type result struct {
	id, label, status string
	at                []time.Time
	vals              []float64
}

// searchExpr is the one form of expression the fake evaluates, the
// average of a search ("CloudWatch search expression syntax", User
// Guide): AVG(SEARCH('{NS[,Dim…]} MetricName="M" TERMS', 'Average',
// PERIOD)), TERMS being Key="V" terms, all of which must hold, each
// alone or an OR of them in parentheses. A schema naming dimensions
// matches only metrics with exactly those dimensions.
var searchExpr = regexp.MustCompile(`^AVG\(SEARCH\('\{([^}]+)\}\s*MetricName="([^"]+)"(.*)',\s*'Average',\s*(\d+)\)\)$`)
var term = regexp.MustCompile(`(\w+)="([^"]*)"`)
var group = regexp.MustCompile(`\(([^)]*)\)|\w+="[^"]*"`)

// searchWindow is how recently a metric must have reported for SEARCH
// to find it: "A search expression can find only metrics that have
// reported data within the past two weeks" (User Guide, "Use search
// expressions in graphs"; ListMetrics' model says the same of itself).
const searchWindow = 14 * 24 * time.Hour

// kept reports whether CloudWatch still holds a datapoint of this age at
// the period asked (GetMetricData's model: 1-minute data "available for
// 15 days", 5-minute "for 63 days", then "available with a resolution of
// 1 hour"; a period finer than what is kept returns nothing).
func kept(age time.Duration, period int) bool {
	switch {
	case age > 63*24*time.Hour:
		return period%3600 == 0
	case age > 15*24*time.Hour:
		return period%300 == 0
	}
	return true
}

// evaluate answers each query over [start, end): a metric's datapoints
// averaged per period (periods aligned to the epoch), or the search
// expression's matching metrics averaged per period and then across.
func (s *Server) evaluate(qs []Query, start, end time.Time, scan string) []result {
	var out []result
	for _, q := range qs {
		if !q.ReturnData {
			continue
		}
		r := result{id: q.ID, status: "Complete"}
		var match []series
		period := q.Period
		if q.Expression != "" {
			m := searchExpr.FindStringSubmatch(q.Expression)
			if m == nil {
				r.status = "InternalError"
				out = append(out, r)
				continue
			}
			period, _ = strconv.Atoi(m[4])
			r.label = q.ID
			schema := strings.Split(m[1], ",")
			for i := range schema {
				schema[i] = strings.TrimSpace(schema[i])
			}
			ns, schema := schema[0], schema[1:]
			if s.deny[ns] {
				r.status = "Forbidden"
				out = append(out, r)
				continue
			}
			for _, x := range s.series {
				if x.namespace != ns || x.name != m[2] || !schemaFits(schema, x.dims) || !termsHold(m[3], x.dims) || !reportedSince(x, s.now().Add(-searchWindow)) {
					continue
				}
				match = append(match, x)
			}
		} else {
			r.label = q.MetricName
			if s.deny[q.Namespace] {
				r.status = "Forbidden"
				out = append(out, r)
				continue
			}
			for _, x := range s.series {
				if x.namespace == q.Namespace && x.name == q.MetricName && sameDims(x.dims, q.Dimensions) {
					match = append(match, x)
				}
			}
		}
		// Per period: the mean of each matching series, then the mean
		// of those means.
		p := time.Duration(period) * time.Second
		sums := map[int64][]float64{}
		for _, x := range match {
			per := map[int64][2]float64{}
			for _, pt := range x.points {
				if pt.At.Before(start) || !pt.At.Before(end) || !kept(s.now().Sub(pt.At), period) {
					continue
				}
				k := pt.At.Truncate(p).Unix()
				a := per[k]
				per[k] = [2]float64{a[0] + pt.Value, a[1] + 1}
			}
			for k, a := range per {
				sums[k] = append(sums[k], a[0]/a[1])
			}
		}
		keys := make([]int64, 0, len(sums))
		for k := range sums {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		if scan != "TimestampAscending" {
			// The API's default, TimestampDescending: newest first.
			sort.Slice(keys, func(i, j int) bool { return keys[i] > keys[j] })
		}
		for _, k := range keys {
			var t float64
			for _, v := range sums[k] {
				t += v
			}
			r.at = append(r.at, time.Unix(k, 0).UTC())
			r.vals = append(r.vals, t/float64(len(sums[k])))
		}
		out = append(out, r)
	}
	return out
}

// schemaFits: a schema of dimension names matches a metric with exactly
// those dimensions; a bare namespace matches any.
func schemaFits(schema []string, dims map[string]string) bool {
	if len(schema) == 0 {
		return true
	}
	if len(schema) != len(dims) {
		return false
	}
	for _, d := range schema {
		if _, ok := dims[d]; !ok {
			return false
		}
	}
	return true
}

// termsHold reports whether every Key="V" term, or one of each
// parenthesised OR group, matches the metric's dimensions.
func termsHold(terms string, dims map[string]string) bool {
	for _, g := range group.FindAllString(terms, -1) {
		any := false
		for _, t := range term.FindAllStringSubmatch(g, -1) {
			v, ok := dims[t[1]]
			any = any || (ok && v == t[2])
		}
		if !any {
			return false
		}
	}
	return true
}

func reportedSince(x series, since time.Time) bool {
	for _, pt := range x.points {
		if !pt.At.Before(since) {
			return true
		}
	}
	return false
}
