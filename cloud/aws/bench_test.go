package aws

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// replay serves recorded DescribeSpotPriceHistory pages by NextToken, so
// the benchmark times the client (signing, HTTP, the SDK's XML
// deserializer, the provider, Series.Merge), not the fake's rendering.
type replay struct {
	fake  *ec2test.Server
	mu    sync.Mutex
	pages map[string][]byte
	bytes int
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err == nil && req.PostForm.Get("Action") == "DescribeSpotPriceHistory" {
		tok := req.PostForm.Get("NextToken")
		r.mu.Lock()
		body, ok := r.pages[tok]
		r.mu.Unlock()
		if !ok {
			rec := httptest.NewRecorder()
			r.fake.ServeHTTP(rec, req)
			body = rec.Body.Bytes()
			r.mu.Lock()
			r.pages[tok] = body
			r.bytes += len(body)
			r.mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
		return
	}
	r.fake.ServeHTTP(w, req)
}

// BenchmarkHistoryMillionPoints parses and stores 1,000,000 spot price
// points: 1,000 pages of 1,000 through the real SDK client, each page
// merged into per-pool Series the way the hub folds events.
func BenchmarkHistoryMillionPoints(b *testing.B) { benchHistory(b, 90*24*time.Hour) }

// BenchmarkHistory100kPoints is the same over 9 days, for profiling.
func BenchmarkHistory100kPoints(b *testing.B) { benchHistory(b, 9*24*time.Hour) }

func benchHistory(b *testing.B, window time.Duration) {
	// 6 GPU types × 3 zones = 18 pools; a change every 140 s for 90 days
	// is 55,543 points a pool, 999,774 in all (plus the 18 in force at
	// the start).
	data := ec2test.Generate(7, []string{"us-east-1"}, testNow.Add(-window), testNow, 140*time.Second)
	fake := ec2test.New(data...)
	rp := &replay{fake: fake, pages: map[string][]byte{}}
	srv := httptest.NewServer(rp)
	defer srv.Close()
	cfg := &awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client()}
	// Unthrottled: this measures the client (a thousand pages a minute
	// would wait on AWS's bucket of 100 refilled at 20 a second).
	p, err := New(context.Background(), Options{Config: cfg, Now: func() time.Time { return testNow },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Unthrottled: true})
	if err != nil {
		b.Fatal(err)
	}
	req := domain.FetchRequest{Query: domain.Query{Regions: []string{"us-east-1"}}, Since: testNow.Add(-window), Until: testNow}
	run := func() (int, map[domain.PoolKey]series.Series) {
		c := newCollector()
		if err := p.Fetch(context.Background(), req, c.sink); err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, ev := range c.events {
			n += len(ev.Points)
		}
		return n, c.series
	}
	points, _ := run() // records the pages and warms the type cache
	b.ResetTimer()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var series map[domain.PoolKey]series.Series
	for i := 0; i < b.N; i++ {
		_, series = run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	var stored, kept int
	for _, s := range series {
		stored += s.Len()
		kept += s.Size()
	}
	b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(kept)/float64(stored), "stored-B/point")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(points)/float64(b.N), "alloc-B/point")
	b.ReportMetric(float64(rp.bytes)/float64(points), "wire-B/point")
	b.ReportMetric(float64(points), "points")
}
