// Command pricesbench times `gpumarket prices --provider aws` — the real
// command: cmd builds the provider, the SDK reads AWS_ENDPOINT_URL_EC2 —
// against the local EC2 endpoint of ec2test with a fixed latency added to
// every answer, over many real regions, and compares the wall time with
// the critical path: the slowest region's sequential history pages times
// the latency, the least any client that pages DescribeSpotPriceHistory
// (each page needs the previous page's NextToken) can take.
//
//	go run ./cloud/aws/ec2test/pricesbench -regions 14 -latency 50ms -window 7d -runs 5
//	go run ./cloud/aws/ec2test/pricesbench -throttle-first   # the first call of each action in each region is throttled
//	go run ./cloud/aws/ec2test/pricesbench -closed-port      # an endpoint that refuses connections
//
// Each run gets a fresh endpoint (so calls are counted per run) and, unless
// -warm, a fresh data dir: the first run of a day, with no cached instance
// types or on-demand prices.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

func main() {
	bin := flag.String("bin", "", "gpumarket binary (default: go build the module into a temp dir)")
	nRegions := flag.Int("regions", 14, "how many of ec2test.GPURegions to serve and ask (at most 16)")
	latency := flag.Duration("latency", 50*time.Millisecond, "added to every answer")
	window := flag.String("window", "7d", "the prices --window")
	step := flag.Duration("step", 20*time.Minute, "time between generated price changes")
	runs := flag.Int("runs", 5, "runs to time")
	throttleFirst := flag.Bool("throttle-first", false, "answer the first call of each action in each region with 503 RequestLimitExceeded")
	rateLimits := flag.Bool("rate-limits", true, "enforce AWS's documented token buckets")
	warm := flag.Bool("warm", false, "keep the data dir between runs (cached instance types and on-demand prices)")
	closedPort := flag.Bool("closed-port", false, "point gpumarket at a port nothing listens on and time the failure")
	flag.Parse()
	if *nRegions < 1 || *nRegions > len(ec2test.GPURegions) {
		log.Fatalf("-regions %d: want 1 to %d", *nRegions, len(ec2test.GPURegions))
	}
	win, err := parseWindow(*window)
	if err != nil {
		log.Fatal(err)
	}
	tmp, err := os.MkdirTemp("", "pricesbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "gpumarket")
		if err := build(*bin); err != nil {
			log.Fatal(err)
		}
	}
	regions := ec2test.GPURegions[:*nRegions]
	now := time.Now().UTC().Truncate(time.Minute)
	// History from a step before the window, as AWS keeps 90 days.
	data := ec2test.Generate(1, regions, now.Add(-win-time.Hour), now.Add(time.Hour), *step)
	args := []string{"prices", "--provider", "aws", "--region", strings.Join(regions, ","), "--window", *window, "-o", "json"}

	if *closedPort {
		closed := closedAddr()
		fmt.Printf("gpumarket %s\nendpoint http://%s (nothing listens)\n", strings.Join(args, " "), closed)
		for i := 0; i < *runs; i++ {
			r := run(*bin, args, env(tmp, "http://"+closed, i, *warm))
			fmt.Printf("run %d: exit %d in %s\n%s", i+1, r.code, r.wall.Round(time.Millisecond), indent(r.stderr))
		}
		return
	}

	fmt.Printf("gpumarket %s\n%d regions, %s latency, history every %s, throttle-first %v, rate limits %v, warm %v\n",
		strings.Join(args, " "), len(regions), *latency, *step, *throttleFirst, *rateLimits, *warm)
	var walls, paths []time.Duration
	for i := 0; i < *runs; i++ {
		fake := ec2test.New(data...)
		fake.Latency = *latency
		fake.EnforceRateLimits = *rateLimits
		if *throttleFirst {
			for _, a := range []string{"DescribeRegions", "DescribeInstanceTypes", "DescribeSpotPriceHistory", "GetSpotPlacementScores", "pricing:GetProducts"} {
				fake.AddFault(ec2test.Throttle(a, "", 1))
			}
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /spot-advisor-data.json", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(*latency)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(advisor.RawEmbedded())
		})
		mux.Handle("/", fake)
		srv := httptest.NewServer(mux)
		r := run(*bin, args, env(tmp, srv.URL, i, *warm))
		srv.Close()
		if r.code != 0 {
			log.Fatalf("run %d: exit %d\n%s", i+1, r.code, r.stderr)
		}
		cp, detail := criticalPath(fake, regions, *latency)
		walls, paths = append(walls, r.wall), append(paths, cp)
		fmt.Printf("run %d: %s wall (gpumarket CPU %s), %d rows, critical path %s (%s), %.2f×\n", i+1, r.wall.Round(time.Millisecond),
			r.cpu.Round(time.Millisecond), r.rows, cp.Round(time.Millisecond), detail, float64(r.wall)/float64(cp))
		if r.stderr != "" {
			fmt.Print(indent(r.stderr))
		}
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	med := walls[len(walls)/2]
	fmt.Printf("wall: min %s, median %s; critical path %s; median / critical path = %.2f×\n",
		walls[0].Round(time.Millisecond), med.Round(time.Millisecond), paths[0].Round(time.Millisecond), float64(med)/float64(paths[0]))
}

// criticalPath is the slowest region's sequential DescribeSpotPriceHistory
// pages (answered or throttled: each is a round trip) times the latency,
// with the per-action call counts of the run.
func criticalPath(fake *ec2test.Server, regions []string, latency time.Duration) (time.Duration, string) {
	most, slowest := 0, ""
	for _, r := range regions {
		if n := fake.Count("DescribeSpotPriceHistory", r); n > most {
			most, slowest = n, r
		}
	}
	counts := map[string]int{}
	throttled := 0
	for _, c := range fake.Calls() {
		counts[c.Action]++
		if c.Faulted {
			throttled++
		}
	}
	var parts []string
	for a, n := range counts {
		parts = append(parts, fmt.Sprintf("%s %d", a, n))
	}
	sort.Strings(parts)
	return time.Duration(most) * latency, fmt.Sprintf("%d pages in %s; calls: %s; throttled %d", most, slowest, strings.Join(parts, ", "), throttled)
}

type result struct {
	wall   time.Duration
	cpu    time.Duration // gpumarket's user and system time
	code   int
	rows   int
	stderr string
}

func run(bin string, args, env []string) result {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		log.Fatalf("run %s: %v", bin, err)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return result{wall: wall, cpu: cpu, code: code, rows: strings.Count(out.String(), `"instance_type"`), stderr: errOut.String()}
}

func env(tmp, endpoint string, i int, warm bool) []string {
	data := filepath.Join(tmp, "data")
	if !warm {
		data = filepath.Join(tmp, fmt.Sprintf("data-%d", i))
	}
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + tmp,
		"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"), "GPUMARKET_DATA_DIR=" + data,
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=" + endpoint, "AWS_ENDPOINT_URL_EC2=" + endpoint,
		"AWS_CONFIG_FILE=" + filepath.Join(tmp, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(tmp, "none"),
		"AWS_EC2_METADATA_DISABLED=true", "GPUMARKET_AWS_ADVISOR_URL=" + endpoint + "/spot-advisor-data.json",
	}
}

// build compiles the module's main package (the module root holds go.mod).
func build(out string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w", root, err)
	}
	return nil
}

// closedAddr is a loopback address nothing listens on: a port taken and
// released.
func closedAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func parseWindow(s string) (time.Duration, error) {
	if strings.HasSuffix(s, "d") {
		var d int
		if _, err := fmt.Sscanf(s, "%dd", &d); err != nil || d <= 0 {
			return 0, fmt.Errorf("-window %q: want 24h, 7d …", s)
		}
		return time.Duration(d) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("-window %q: want 24h, 7d …", s)
	}
	return d, nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
