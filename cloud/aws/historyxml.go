package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go/middleware"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// A 90-day back-fill is a thousand pages of a thousand items per region, and the
// SDK's encoding/xml walk (~3 KB, 10 µs an item) kept two cores busy longer than
// the network. This reads plain answers in one pass, sharing repeated strings;
// anything else goes, bytes unchanged, to the SDK's deserializer (FuzzHistoryXML).

// historyDeserializer replaces the SDK's DescribeSpotPriceHistory deserializer, keeping it for the rest.
type historyDeserializer struct {
	sdk middleware.DeserializeMiddleware
}

// ID is the SDK deserializer's, which this one replaces in the stack.
func (historyDeserializer) ID() string { return "OperationDeserializer" }

// HandleDeserialize reads a successful answer itself and hands anything else to the SDK.
func (d historyDeserializer) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return d.sdk.HandleDeserialize(ctx, in, answered{out, md, err})
	}
	body, rerr := readBody(resp)
	resp.Body.Close()
	if rerr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{rerr}))
		return d.sdk.HandleDeserialize(ctx, in, answered{out, md, nil})
	}
	result, perr := parseSpotPriceHistory(body)
	if perr != nil {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return d.sdk.HandleDeserialize(ctx, in, answered{out, md, nil})
	}
	out.Result = result
	return out, md, nil
}

// readBody reads an answer into one buffer of its Content-Length (io.ReadAll would grow it a dozen times).
func readBody(resp *smithyhttp.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 64<<20 {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return b, err
		}
		// Past the announced length is the transport's error: read it, as io.ReadAll would.
		rest, err := io.ReadAll(resp.Body)
		return append(b, rest...), err
	}
	return io.ReadAll(resp.Body)
}

// answered is the rest of the stack, already run, for the SDK's deserializer.
type answered struct {
	out middleware.DeserializeOutput
	md  middleware.Metadata
	err error
}

func (a answered) HandleDeserialize(context.Context, middleware.DeserializeInput) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return a.out, a.md, a.err
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func withHistoryDeserializer(o *ec2.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		sdk, found := s.Deserialize.Get("OperationDeserializer")
		if !found {
			return errors.New("describe spot price history: the SDK's deserializer is not in the stack")
		}
		_, err := s.Deserialize.Swap("OperationDeserializer", historyDeserializer{sdk: sdk})
		return err
	})
}

var errNotPlain = errors.New("not a plain DescribeSpotPriceHistory answer")

// parseSpotPriceHistory reads nextToken and the spotPriceHistorySet items;
// names match case-insensitively and unknown text elements are skipped, as in
// the SDK. Entities, prefixes and nesting elsewhere are not plain: the SDK reads them.
func parseSpotPriceHistory(body []byte) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	// Sized for a page's items: growing the maps cost dozens of allocations a page.
	n := bytes.Count(body, []byte("<item>"))
	x := xmlScanner{b: body, strs: make(map[string]*string, n), times: make(map[string]*time.Time, 64)}
	x.i = len(prolog.Find(body))
	// "]]>" ends CDATA (not plain) and is an error anywhere else, as encoding/xml says.
	if !utf8.Valid(body) || bytes.HasPrefix(body[x.i:], []byte("<?")) || bytes.Contains(body, []byte("]]>")) {
		return nil, errNotPlain
	}
	root, self, ok := x.open(true)
	out, sawSet := &ec2.DescribeSpotPriceHistoryOutput{}, false
	ok = ok && (self || x.each(root, "spotPriceHistorySet", func(set []byte, self bool) bool {
		if sawSet {
			return false
		}
		sawSet = true
		out.SpotPriceHistory = make([]ec2types.SpotPrice, 0, n)
		return self || x.each(set, "item", func(item []byte, self bool) bool {
			var sp ec2types.SpotPrice
			ok := self || x.each(item, "", nil, func(name, v []byte) bool { return x.field(&sp, name, v) })
			out.SpotPriceHistory = append(out.SpotPriceHistory, sp)
			return ok
		}, nil)
	}, func(name, v []byte) bool {
		if equalFold(name, "nextToken") {
			out.NextToken = x.str(v)
		}
		return true
	}))
	if !ok {
		return nil, errNotPlain
	}
	return out, x.end()
}

// xmlScanner walks a small subset of XML (elements without prefixes, plain
// text); anything else fails the scan.
type xmlScanner struct {
	b     []byte
	i     int
	strs  map[string]*string
	times map[string]*time.Time
}

func (x *xmlScanner) space() {
	for x.i < len(x.b) && isSpace(x.b[x.i]) {
		x.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// prolog is the XML declaration read here, if any; others are left to encoding/xml.
var prolog = regexp.MustCompile(`^[ \t\n]*(<\?xml version="1\.0"( encoding="(UTF|utf)-8")?\?>)?[ \t\n]*`)

// open reads a start tag: its name and whether it closes itself. Only the
// root may have attributes (AWS's xmlns), with plain values.
func (x *xmlScanner) open(root bool) (name []byte, self, ok bool) {
	if x.i+1 >= len(x.b) || x.b[x.i] != '<' || !isNameStart(x.b[x.i+1]) {
		return nil, false, false
	}
	j, k := x.i+1, x.i+2
	for k < len(x.b) && isNameByte(x.b[k]) {
		k++
	}
	end := bytes.IndexByte(x.b[k:], '>')
	if end < 0 {
		return nil, false, false
	}
	attrs := x.b[k : k+end]
	if len(attrs) > 0 && attrs[len(attrs)-1] == '/' {
		self = true
		attrs = attrs[:len(attrs)-1]
	}
	if root && !rootAttrs.Match(attrs) || !root && len(bytes.Trim(attrs, " \t\n")) > 0 {
		return nil, false, false
	}
	x.i = k + end + 1
	return x.b[j:k], self, true
}

// rootAttrs are attributes with values of printable ASCII but no markup or entity.
var rootAttrs = regexp.MustCompile(`^([ \t\n]+[A-Za-z_][A-Za-z0-9_.:-]*="[ !#-%'-;=?-~]*")*[ \t\n]*$`)

func (x *xmlScanner) closeTag(name []byte) bool {
	if !bytes.HasPrefix(x.b[x.i:], []byte("</")) || !bytes.HasPrefix(x.b[x.i+2:], name) {
		return false
	}
	k := x.i + 2 + len(name)
	for k < len(x.b) && isSpace(x.b[k]) {
		k++
	}
	if k >= len(x.b) || x.b[k] != '>' {
		return false
	}
	x.i = k + 1
	return true
}

// each reads parent's children up to its end tag: one named nest goes to in,
// any other is a text element whose value goes to leaf (nil: skipped).
func (x *xmlScanner) each(parent []byte, nest string, in func(name []byte, self bool) bool, leaf func(name, v []byte) bool) bool {
	for {
		x.space()
		if bytes.HasPrefix(x.b[x.i:], []byte("</")) {
			return x.closeTag(parent)
		}
		name, self, ok := x.open(false)
		switch {
		case !ok:
			return false
		case equalFold(name, nest):
			ok = in(name, self)
		default:
			var v []byte
			v, ok = x.text(name, self)
			ok = ok && (leaf == nil || leaf(name, v))
		}
		if !ok {
			return false
		}
	}
}

// text reads the element's plain text up to its end tag (empty if self-closed,
// as the SDK reads it): ASCII without entity, carriage return or control byte.
func (x *xmlScanner) text(name []byte, self bool) ([]byte, bool) {
	if self {
		return []byte{}, true
	}
	j := bytes.IndexByte(x.b[x.i:], '<')
	if j < 0 {
		return nil, false
	}
	v := x.b[x.i : x.i+j]
	x.i += j
	if !x.closeTag(name) || bytes.IndexByte(v, '&') >= 0 {
		return nil, false
	}
	for _, c := range v {
		if c < 0x20 && c != '\t' && c != '\n' || c >= 0x80 {
			return nil, false
		}
	}
	return v, true
}

func (x *xmlScanner) end() error {
	x.space()
	if x.i != len(x.b) {
		return errNotPlain
	}
	return nil
}

// field sets the item's member of that name, as the SDK reads it.
func (x *xmlScanner) field(sp *ec2types.SpotPrice, name, v []byte) bool {
	switch {
	case equalFold(name, "availabilityZone"):
		sp.AvailabilityZone = x.str(v)
	case equalFold(name, "availabilityZoneId"):
		sp.AvailabilityZoneId = x.str(v)
	case equalFold(name, "instanceType"):
		sp.InstanceType = ec2types.InstanceType(*x.str(v))
	case equalFold(name, "productDescription"):
		sp.ProductDescription = ec2types.RIProductDescription(*x.str(v))
	case equalFold(name, "spotPrice"):
		sp.SpotPrice = x.str(v)
	case equalFold(name, "timestamp"):
		var ok bool
		sp.Timestamp, ok = x.time(v)
		return ok
	}
	return true
}

// str returns a shared pointer to v: a page repeats a few types, zones and prices.
func (x *xmlScanner) str(v []byte) *string {
	if p, ok := x.strs[string(v)]; ok {
		return p
	}
	s := string(v)
	x.strs[s] = &s
	return &s
}

// time parses as the SDK does (smithytime.ParseDateTime), shared within a page.
func (x *xmlScanner) time(v []byte) (*time.Time, bool) {
	if p, ok := x.times[string(v)]; ok {
		return p, true
	}
	t, err := smithytime.ParseDateTime(string(v))
	if err != nil {
		return nil, false
	}
	x.times[string(v)] = &t
	return &t, true
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// isNameByte: a prefix's colon is not, so a prefixed name is not plain.
func isNameByte(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.'
}

// equalFold is bytes.EqualFold for an ASCII name and s of letters only.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i]|0x20 != s[i]|0x20 {
			return false
		}
	}
	return true
}
