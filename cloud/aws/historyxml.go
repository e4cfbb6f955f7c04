package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go/middleware"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DescribeSpotPriceHistory's answers are most of what the fetch reads: a
// 90-day back-fill of one region is a thousand pages of a thousand items.
// The SDK's deserializer walks them with encoding/xml, about 3 KB of
// allocations and 10µs of CPU an item, so fourteen regions' pages arriving
// together kept two cores busy longer than the network took to bring them.
// historyDeserializer reads the same answers in one pass over the bytes,
// sharing the strings that repeat (types, zones, prices, times). It is
// strict: anything it does not recognise as a plain answer (an error
// status, a comment, a CDATA section, an unknown entity, mismatched tags)
// is handed, bytes unchanged, to the SDK's own deserializer, so callers see
// exactly what the SDK would say. FuzzHistoryXML checks both agree.

// historyDeserializer replaces the SDK's DescribeSpotPriceHistory
// deserializer and keeps it for the answers it leaves to it.
type historyDeserializer struct {
	sdk middleware.DeserializeMiddleware
}

// ID is the SDK deserializer's, which this one replaces in the stack.
func (historyDeserializer) ID() string { return "OperationDeserializer" }

// HandleDeserialize reads a successful answer itself and hands anything
// else to the SDK.
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
		// The SDK's deserializer would fail to read it too; let it say so.
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

// readBody reads an answer into one buffer of its Content-Length (a page
// is ~300 KB: io.ReadAll would grow its buffer a dozen times).
func readBody(resp *smithyhttp.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 64<<20 {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return b, err
		}
		// Anything past the announced length is an error of the
		// transport, which io.ReadAll would have read: read it too.
		rest, err := io.ReadAll(resp.Body)
		return append(b, rest...), err
	}
	return io.ReadAll(resp.Body)
}

// answered is the rest of the stack, already run: the SDK's deserializer
// gets the response it would have got.
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

// withHistoryDeserializer installs historyDeserializer in a call's stack.
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

// errNotPlain makes parseSpotPriceHistory leave an answer to the SDK.
var errNotPlain = errors.New("not a plain DescribeSpotPriceHistory answer")

// parseSpotPriceHistory reads a DescribeSpotPriceHistoryResponse: its
// nextToken and the items of its spotPriceHistorySet. Element names match
// case-insensitively and unknown elements are skipped, as in the SDK.
func parseSpotPriceHistory(body []byte) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	if !utf8.Valid(body) {
		return nil, errNotPlain
	}
	x := xmlScanner{b: body, strs: map[string]*string{}, times: map[string]*time.Time{}}
	if !x.prolog() {
		return nil, errNotPlain
	}
	root, _, self, ok := x.open()
	if !ok {
		return nil, errNotPlain
	}
	out := &ec2.DescribeSpotPriceHistoryOutput{}
	if self {
		return out, x.end()
	}
	sawSet := false
	for {
		raw, name, self, closed, ok := x.child(root)
		if !ok {
			return nil, errNotPlain
		}
		if closed {
			break
		}
		switch {
		case equalFold(name, "nextToken"):
			v, ok := x.text(raw, self)
			if !ok {
				return nil, errNotPlain
			}
			out.NextToken = x.str(v)
		case equalFold(name, "spotPriceHistorySet"):
			if sawSet {
				return nil, errNotPlain
			}
			sawSet = true
			out.SpotPriceHistory = make([]ec2types.SpotPrice, 0, bytes.Count(x.b[x.i:], []byte("<item>")))
			if !self && !x.items(raw, &out.SpotPriceHistory) {
				return nil, errNotPlain
			}
		default:
			if !x.skip(raw, self) {
				return nil, errNotPlain
			}
		}
	}
	return out, x.end()
}

// xmlScanner walks a small subset of XML: elements (whose attributes are
// namespace declarations and the like), text with the predefined and
// numeric entities. Anything else fails the scan (ok false).
type xmlScanner struct {
	b     []byte
	i     int
	strs  map[string]*string
	times map[string]*time.Time
	buf   []byte
}

func (x *xmlScanner) space() {
	for x.i < len(x.b) {
		switch x.b[x.i] {
		case ' ', '\t', '\n':
			x.i++
		default:
			return
		}
	}
}

// prologs are the XML declarations read here; any other is left to
// encoding/xml (which refuses encodings other than UTF-8, for one).
var prologs = [][]byte{
	[]byte(`<?xml version="1.0" encoding="UTF-8"?>`), []byte(`<?xml version="1.0" encoding="utf-8"?>`), []byte(`<?xml version="1.0"?>`),
}

// prolog skips the XML declaration, if it is one of prologs.
func (x *xmlScanner) prolog() bool {
	x.space()
	if bytes.HasPrefix(x.b[x.i:], []byte("<?")) {
		known := false
		for _, p := range prologs {
			if bytes.HasPrefix(x.b[x.i:], p) {
				x.i += len(p)
				known = true
				break
			}
		}
		if !known {
			return false
		}
	}
	x.space()
	return true
}

// open reads a start tag at the cursor: its name as written, its local
// name (after any prefix) and whether it closes itself.
func (x *xmlScanner) open() (raw, local []byte, self, ok bool) {
	if x.i >= len(x.b) || x.b[x.i] != '<' {
		return nil, nil, false, false
	}
	j := x.i + 1
	if j >= len(x.b) || !isNameStart(x.b[j]) {
		return nil, nil, false, false
	}
	k := j + 1
	for k < len(x.b) && isNameByte(x.b[k]) {
		k++
	}
	raw = x.b[j:k]
	local = raw
	if c := bytes.LastIndexByte(raw, ':'); c >= 0 {
		local = raw[c+1:]
		if len(local) == 0 || !isNameStart(local[0]) || c == 0 {
			return nil, nil, false, false
		}
	}
	end := bytes.IndexByte(x.b[k:], '>')
	if end < 0 {
		return nil, nil, false, false
	}
	attrs := x.b[k : k+end]
	if len(attrs) > 0 && attrs[len(attrs)-1] == '/' {
		self = true
		attrs = attrs[:len(attrs)-1]
	}
	if !plainAttrs(attrs) {
		return nil, nil, false, false
	}
	x.i = k + end + 1
	return raw, local, self, true
}

// plainAttrs reports whether a start tag's rest is attributes name="value"
// (or 'value') with plain values: no markup, entities or control bytes.
func plainAttrs(a []byte) bool {
	i := 0
	for {
		n := i
		for i < len(a) && (a[i] == ' ' || a[i] == '\t' || a[i] == '\n') {
			i++
		}
		if i == len(a) {
			return true
		}
		if i == n || !isNameStart(a[i]) {
			return false // attributes are separated by space
		}
		for i < len(a) && isNameByte(a[i]) {
			i++
		}
		if i >= len(a) || a[i] != '=' {
			return false
		}
		i++
		if i >= len(a) || (a[i] != '"' && a[i] != '\'') {
			return false
		}
		q := a[i]
		i++
		j := bytes.IndexByte(a[i:], q)
		if j < 0 {
			return false
		}
		for _, c := range a[i : i+j] {
			if c == '<' || c == '&' || c < 0x20 || c >= 0x80 {
				return false
			}
		}
		i += j + 1
	}
}

// closeTag reads the end tag of the element named raw.
func (x *xmlScanner) closeTag(raw []byte) bool {
	if !bytes.HasPrefix(x.b[x.i:], []byte("</")) || !bytes.HasPrefix(x.b[x.i+2:], raw) {
		return false
	}
	k := x.i + 2 + len(raw)
	for k < len(x.b) && (x.b[k] == ' ' || x.b[k] == '\t' || x.b[k] == '\n') {
		k++
	}
	if k >= len(x.b) || x.b[k] != '>' {
		return false
	}
	x.i = k + 1
	return true
}

// child moves to the next child element of the element named parent, or
// reads parent's end tag (closed).
func (x *xmlScanner) child(parent []byte) (raw, local []byte, self, closed, ok bool) {
	x.space()
	if bytes.HasPrefix(x.b[x.i:], []byte("</")) {
		return nil, nil, false, true, x.closeTag(parent)
	}
	raw, local, self, ok = x.open()
	return raw, local, self, false, ok
}

// text reads the text of the element named raw up to its end tag (empty
// when it has none or closes itself, as the SDK reads it).
func (x *xmlScanner) text(raw []byte, self bool) ([]byte, bool) {
	if self {
		return []byte{}, true
	}
	j := bytes.IndexByte(x.b[x.i:], '<')
	if j < 0 {
		return nil, false
	}
	v := x.b[x.i : x.i+j]
	x.i += j
	if !x.closeTag(raw) || !plainText(v) {
		return nil, false
	}
	if bytes.IndexByte(v, '&') < 0 {
		return v, true
	}
	return x.unescape(v)
}

// plainText reports whether text holds only characters encoding/xml takes
// as they are: no carriage return (which it rewrites), no character XML
// forbids.
func plainText(v []byte) bool {
	for i := 0; i < len(v); {
		c := v[i]
		if c < 0x80 {
			if c < 0x20 && c != '\t' && c != '\n' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(v[i:])
		if !isXMLChar(r) {
			return false
		}
		i += n
	}
	return true
}

// unescape decodes the predefined and numeric entities.
func (x *xmlScanner) unescape(raw []byte) ([]byte, bool) {
	out := x.buf[:0]
	for len(raw) > 0 {
		amp := bytes.IndexByte(raw, '&')
		if amp < 0 {
			out = append(out, raw...)
			break
		}
		out = append(out, raw[:amp]...)
		raw = raw[amp+1:]
		semi := bytes.IndexByte(raw, ';')
		if semi <= 0 {
			return nil, false
		}
		ent := string(raw[:semi])
		raw = raw[semi+1:]
		switch ent {
		case "amp":
			out = append(out, '&')
		case "lt":
			out = append(out, '<')
		case "gt":
			out = append(out, '>')
		case "quot":
			out = append(out, '"')
		case "apos":
			out = append(out, '\'')
		default:
			if len(ent) < 2 || ent[0] != '#' {
				return nil, false
			}
			var n uint64
			var err error
			if ent[1] == 'x' {
				n, err = strconv.ParseUint(ent[2:], 16, 32)
			} else {
				n, err = strconv.ParseUint(ent[1:], 10, 32)
			}
			if err != nil || !isXMLChar(rune(n)) {
				return nil, false
			}
			out = utf8.AppendRune(out, rune(n))
		}
	}
	x.buf = out
	return out, true
}

// isXMLChar is encoding/xml's test of a character reference.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// skip passes over the element named raw, with what it holds.
func (x *xmlScanner) skip(raw []byte, self bool) bool {
	if self {
		return true
	}
	for {
		if j := bytes.IndexByte(x.b[x.i:], '<'); j < 0 {
			return false
		} else if v := x.b[x.i : x.i+j]; !plainText(v) || bytes.IndexByte(v, '&') >= 0 {
			return false
		} else {
			x.i += j
		}
		craw, _, cself, closed, ok := x.child(raw)
		if !ok {
			return false
		}
		if closed {
			return true
		}
		if !x.skip(craw, cself) {
			return false
		}
	}
}

// end checks that nothing but space follows the root element.
func (x *xmlScanner) end() error {
	x.space()
	if x.i != len(x.b) {
		return errNotPlain
	}
	return nil
}

// items reads the item elements of the spotPriceHistorySet named set.
func (x *xmlScanner) items(set []byte, list *[]ec2types.SpotPrice) bool {
	for {
		raw, name, self, closed, ok := x.child(set)
		if !ok {
			return false
		}
		if closed {
			return true
		}
		if !equalFold(name, "item") {
			if !x.skip(raw, self) {
				return false
			}
			continue
		}
		var sp ec2types.SpotPrice
		if !self && !x.item(raw, &sp) {
			return false
		}
		*list = append(*list, sp)
	}
}

// item reads one SpotPrice.
func (x *xmlScanner) item(item []byte, sp *ec2types.SpotPrice) bool {
	for {
		raw, name, self, closed, ok := x.child(item)
		if !ok {
			return false
		}
		if closed {
			return true
		}
		var field int
		switch {
		case equalFold(name, "availabilityZone"):
			field = 1
		case equalFold(name, "availabilityZoneId"):
			field = 2
		case equalFold(name, "instanceType"):
			field = 3
		case equalFold(name, "productDescription"):
			field = 4
		case equalFold(name, "spotPrice"):
			field = 5
		case equalFold(name, "timestamp"):
			field = 6
		default:
			if !x.skip(raw, self) {
				return false
			}
			continue
		}
		v, ok := x.text(raw, self)
		if !ok {
			return false
		}
		switch field {
		case 1:
			sp.AvailabilityZone = x.str(v)
		case 2:
			sp.AvailabilityZoneId = x.str(v)
		case 3:
			sp.InstanceType = ec2types.InstanceType(*x.str(v))
		case 4:
			sp.ProductDescription = ec2types.RIProductDescription(*x.str(v))
		case 5:
			sp.SpotPrice = x.str(v)
		case 6:
			t, ok := x.time(v)
			if !ok {
				return false
			}
			sp.Timestamp = t
		}
	}
}

// str returns a shared pointer to the string v: a page's items repeat the
// same few types, zones, products and prices.
func (x *xmlScanner) str(v []byte) *string {
	if p, ok := x.strs[string(v)]; ok {
		return p
	}
	s := string(v)
	x.strs[s] = &s
	return &s
}

// time parses a timestamp as the SDK does (smithytime.ParseDateTime),
// sharing the result between the items of a page that have the same one.
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

func isNameByte(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == ':' || c == '-' || c == '.'
}

// equalFold is strings.EqualFold for an ASCII name read from the bytes.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}
