package aws

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

// bodyClient answers every request with the same body.
type bodyClient struct {
	status int
	body   []byte
}

func (c bodyClient) Do(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {"text/xml;charset=UTF-8"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r}, nil
}

// historyClient is an EC2 client whose answers come from the calls'
// options (one client for every fuzz input: building one is costly).
var historyClient = ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: awssdk.String("http://ec2.test"), RetryMaxAttempts: 1,
	Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})

// describeHistory reads body as a DescribeSpotPriceHistory answer through
// the SDK's client, with its own deserializer or, fast, with
// historyDeserializer.
func describeHistory(status int, body []byte, fast bool) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	opts := []func(*ec2.Options){func(o *ec2.Options) { o.HTTPClient = bodyClient{status, body} }}
	if fast {
		opts = append(opts, withHistoryDeserializer)
	}
	return historyClient.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{}, opts...)
}

// render writes an output the way the tests compare them: every member,
// nil apart from empty.
func render(out *ec2.DescribeSpotPriceHistoryOutput) string {
	var b strings.Builder
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%q", *p)
	}
	fmt.Fprintf(&b, "next %s, %d items\n", s(out.NextToken), len(out.SpotPriceHistory))
	for _, sp := range out.SpotPriceHistory {
		ts := "<nil>"
		if sp.Timestamp != nil {
			ts = sp.Timestamp.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "%q %q %s %s %s %s\n", sp.InstanceType, sp.ProductDescription, s(sp.SpotPrice), ts, s(sp.AvailabilityZone), s(sp.AvailabilityZoneId))
	}
	return b.String()
}

// agree checks that the fast reader and the SDK's read body alike: the
// same output or both an error; and that whatever the fast reader accepts
// on its own, the SDK reads the same way.
func agree(t *testing.T, body []byte) {
	t.Helper()
	sdk, sdkErr := describeHistory(200, body, false)
	fast, fastErr := describeHistory(200, body, true)
	if (sdkErr == nil) != (fastErr == nil) {
		t.Fatalf("SDK error %v, fast error %v", sdkErr, fastErr)
	}
	if sdkErr == nil && render(sdk) != render(fast) {
		t.Fatalf("outputs differ:\nSDK:\n%s\nfast:\n%s", render(sdk), render(fast))
	}
	if own, err := parseSpotPriceHistory(body); err == nil {
		if sdkErr != nil {
			t.Fatalf("the fast reader read what the SDK refuses (%v):\n%s", sdkErr, render(own))
		}
		if render(own) != render(sdk) {
			t.Fatalf("own read differs:\nSDK:\n%s\nown:\n%s", render(sdk), render(own))
		}
	}
}

func recordedPages(t testing.TB) map[string][]byte {
	pages := map[string][]byte{}
	paths, _ := filepath.Glob("../../testdata/ec2/describe-spot-price-history-*.xml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.Base(p)] = b
	}
	if len(pages) < 3 {
		t.Fatalf("recorded pages %v: want the three of testdata/ec2", paths)
	}
	return pages
}

// fakePage is a page of 1,000 items as the local endpoint renders it.
func fakePage(t testing.TB) []byte {
	fake := ec2test.New(ec2test.Generate(3, []string{"us-east-1"}, testNow.Add(-48*time.Hour), testNow, 10*time.Minute)...)
	srv := fake.Start()
	defer srv.Close()
	var body []byte
	cfg := awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		HTTPClient: capture{srv.Client(), &body}}
	_, err := ec2.NewFromConfig(cfg).DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{MaxResults: awssdk.Int32(1000)})
	if err != nil || len(body) == 0 {
		t.Fatalf("fake page: %v", err)
	}
	return body
}

// capture keeps the last answer's body.
type capture struct {
	c    *http.Client
	body *[]byte
}

func (c capture) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.c.Do(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	*c.body = b
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, err
}

// TestHistoryXMLMatchesSDK reads the recorded answers and a fake page of
// 1,000 items both ways.
func TestHistoryXMLMatchesSDK(t *testing.T) {
	for name, body := range recordedPages(t) {
		t.Run(name, func(t *testing.T) {
			agree(t, body)
			if _, err := parseSpotPriceHistory(body); err != nil {
				t.Errorf("the fast reader left a recorded answer to the SDK: %v", err)
			}
		})
	}
	page := fakePage(t)
	agree(t, page)
	out, err := parseSpotPriceHistory(page)
	if err != nil || len(out.SpotPriceHistory) != 1000 {
		t.Fatalf("fake page: %v, %d items", err, len(out.SpotPriceHistory))
	}
}

// Errors are the SDK's own: an error status is read by its deserializer.
func TestHistoryXMLLeavesErrorsToSDK(t *testing.T) {
	body := []byte(`<?xml version="1.0"?><Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>x</RequestID></Response>`)
	_, fastErr := describeHistory(503, body, true)
	_, sdkErr := describeHistory(503, body, false)
	if fastErr == nil || sdkErr == nil || apiCode(fastErr) != "RequestLimitExceeded" || fastErr.Error() != sdkErr.Error() {
		t.Errorf("fast %v, SDK %v: want the same RequestLimitExceeded", fastErr, sdkErr)
	}
}

var historySeeds = []string{
	``, `   `, `<a/>`, `<a></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><SpotPriceHistorySet><ITEM><SpotPrice>1</SpotPrice><TimeStamp>2026-06-10T11:54:12Z</TimeStamp></ITEM></SpotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item/><item><instanceType/></item></spotPriceHistorySet><nextToken/></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1&amp;2&#65;&#x42;&lt;</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1&nope;</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1<!-- c -->2</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice><![CDATA[1.5]]></spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1</item></spotPrice></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1</spotPrice></item></spotPriceHistorySet></a>trailing`,
	`<a><spotPriceHistorySet><item><spotPrice>1` + "\r\n" + `</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>` + "\x01" + `</spotPrice></item></spotPriceHistorySet></a>`,
	`<a xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><ec2:spotPriceHistorySet xmlns:ec2="x"><ec2:item><ec2:spotPrice>2</ec2:spotPrice></ec2:item></ec2:spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><other><x>1</x>text</other><spotPrice>3</spotPrice></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><timestamp>yesterday</timestamp></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice a=">">1</spotPrice></item></spotPriceHistorySet></a>`,
	`<?xml version="1.0" encoding="ISO-8859-1"?><a><nextToken>t</nextToken></a>`,
	`<a><nextToken>t1</nextToken><nextToken>t2</nextToken><spotPriceHistorySet/><spotPriceHistorySet/></a>`,
	`<a>text<nextToken>t</nextToken></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>1</spotPrice ></item></spotPriceHistorySet></a>`,
	`<a><spotPriceHistorySet><item><spotPrice>]]></spotPrice></item></spotPriceHistorySet></a>`,
}

func FuzzHistoryXML(f *testing.F) {
	for _, s := range historySeeds {
		f.Add([]byte(s))
	}
	for _, b := range recordedPages(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		agree(t, body)
	})
}

func TestHistoryXMLSeeds(t *testing.T) {
	for i, s := range historySeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) { agree(t, []byte(s)) })
	}
}

// The fast reader shares the strings a page repeats: a page of 1,000
// items costs a few allocations per distinct value, not per item.
func BenchmarkHistoryXML(b *testing.B) {
	page := fakePage(b)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := parseSpotPriceHistory(page); err != nil {
			b.Fatal(err)
		}
	}
}
