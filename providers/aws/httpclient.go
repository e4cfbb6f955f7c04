package aws

import (
	"io"
	"net/http"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// plainBodyClient hides the request body's io.WriterTo from net/http.
//
// Why: smithy-go wraps the body in a reader whose WriteTo answers
// (0, io.EOF) once the SDK has closed it, and the SDK closes it as soon as
// the response headers arrive. net/http, after sending Content-Length
// bytes, copies the body once more to check for extra bytes; when that
// copy comes after the close (a fast endpoint, a large answer), io.Copy
// reports the io.EOF as an error, the transport tears the connection down,
// and the answer being read fails with "use of closed network connection"
// — about one large DescribeSpotPriceHistory page in six against a
// loopback endpoint, each costing a retry with backoff, or a failed
// PurchaseCapacityBlock, which is never retried. Through Read, a closed
// body is a clean end of file.
type plainBodyClient struct{ inner awssdk.HTTPClient }

// Do sends the request with its body behind a plain io.ReadCloser.
func (c plainBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = plainBody{req.Body}
	}
	return c.inner.Do(req)
}

type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }

func withPlainBodies(c awssdk.HTTPClient) awssdk.HTTPClient {
	if c == nil {
		c = awshttp.NewBuildableClient()
	}
	if _, ok := c.(plainBodyClient); ok {
		return c
	}
	return plainBodyClient{inner: c}
}
