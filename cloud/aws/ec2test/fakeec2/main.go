// Command fakeec2 serves the ec2test fake EC2 endpoint (and the Price List
// API, and the Spot Advisor file at /spot-advisor-data.json) on a loopback
// address, with generated data for a few regions, so gpumarket can be run
// against "AWS" by hand:
//
//	go run ./cloud/aws/ec2test/fakeec2 -listen 127.0.0.1:4566
//	AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y AWS_REGION=us-east-1 \
//	  AWS_ENDPOINT_URL=http://127.0.0.1:4566 gpumarket prices --provider aws --region us-east-1,us-west-2
//
// With -throttle-first (the default) the first call of every action in
// every region answers 503 RequestLimitExceeded, as a busy account sees.
// -latency adds a round trip to every answer (50ms is a far region's);
// -regions gpu serves the sixteen real GPU regions of ec2test.GPURegions;
// -rate-limits enforces AWS's documented token buckets; -fail-region and
// -hang-region make one region answer 500 InternalError or never answer.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4566", "address to serve on (loopback)")
	regions := flag.String("regions", "us-east-1,us-west-2", "regions to serve, a comma list")
	history := flag.Duration("history", 7*24*time.Hour, "length of the generated spot price history")
	step := flag.Duration("step", 20*time.Minute, "time between generated price changes")
	seed := flag.Uint64("seed", 1, "seed of the generated data")
	throttle := flag.Bool("throttle-first", true, "answer the first call of each action in each region with 503 RequestLimitExceeded")
	maxPage := flag.Int("max-page", 0, "cap every page at this many items (0: as asked), to show paging")
	denyScores := flag.Bool("deny-scores", false, "refuse GetSpotPlacementScores (UnauthorizedOperation)")
	latency := flag.Duration("latency", 0, "added to every answer (EC2, Price List and the advisor file)")
	rateLimits := flag.Bool("rate-limits", false, "answer RequestLimitExceeded when AWS's documented token buckets run dry")
	failRegion := flag.String("fail-region", "", "a region whose every EC2 call answers 500 InternalError")
	hangRegion := flag.String("hang-region", "", "a region whose EC2 calls are never answered")
	verbose := flag.Bool("v", false, "log every call")
	flag.Parse()

	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		log.Fatalf("-listen %q: want host:port", *listen)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Fatalf("-listen %q: fakeec2 serves on loopback only (127.0.0.1, ::1, localhost)", *listen)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	var names []string
	for _, r := range strings.Split(*regions, ",") {
		if r = strings.TrimSpace(r); r == "gpu" {
			names = append(names, ec2test.GPURegions...)
		} else if r != "" {
			names = append(names, r)
		}
	}
	fake := ec2test.New(ec2test.Generate(*seed, names, now.Add(-*history), now, *step)...)
	fake.MaxPage = *maxPage
	fake.DenyPlacementScores = *denyScores
	fake.Latency = *latency
	fake.EnforceRateLimits = *rateLimits
	if *failRegion != "" {
		fake.AddFault(ec2test.Fault{Region: *failRegion, Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred"})
	}
	if *hangRegion != "" {
		fake.AddFault(ec2test.Fault{Region: *hangRegion, Hang: true})
	}
	if *throttle {
		for _, a := range []string{"DescribeRegions", "DescribeInstanceTypes", "DescribeSpotPriceHistory", "DescribeCapacityBlockOfferings"} {
			fake.AddFault(ec2test.Throttle(a, "", 1))
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /spot-advisor-data.json", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(*latency)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(advisor.RawEmbedded())
	})
	mux.Handle("/", logged(fake, *verbose))
	fmt.Fprintf(os.Stderr, "fakeec2: serving %s on http://%s (history %s, throttle-first %v)\n", strings.Join(names, ","), *listen, *history, *throttle)
	log.Fatal(http.ListenAndServe(*listen, mux))
}

func logged(h http.Handler, on bool) http.Handler {
	if !on {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(rec, r)
		target := r.Header.Get("X-Amz-Target")
		if target == "" {
			target = r.PostFormValue("Action")
		}
		log.Printf("%s %d", target, rec.status)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
