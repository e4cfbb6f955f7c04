// Package series keeps price history as compact step functions.
package series

import (
	"encoding/binary"
	"iter"
	"math"
	"slices"
	"sort"
	"sync"
)

// Series is a pool's spot price history: a step function over points at strictly
// ascending Unix seconds, stored in blocks (docs/DESIGN.md, "How history is stored").
// It is read-only: later versions of it only append past the lengths it holds.
type Series struct {
	sealed   *sealed // nil until a block is sealed; never changed once made
	tail     []point // the newest points, fewer than blockLen, raw
	tailArea float64 // from the first point to tail[0]
}

// sealed are a series' sealed blocks.
type sealed struct {
	blocks []block // blockLen points each, oldest first
	data   []byte  // their encoded points, after each block's first
	tree   []span  // min and max over blocks: a segment tree, leaves at len(blocks)
}

type point struct {
	at  int64
	usd float64
}

func (s Series) blocks() []block {
	if s.sealed == nil {
		return nil
	}
	return s.sealed.blocks
}

// blockLen is the points of a sealed block: longer costs less per point, more per query.
const blockLen = 128

// block is a sealed block's header.
type block struct {
	t0, t1    int64   // the first and last point's times
	p0, p1    float64 // their prices
	cum, area float64 // price × seconds from the first point to t0, and from t0 to t1
	off       uint32  // where the block's encoded points start in data
	digits    int8    // decimals of its prices' quantum, rawDigits for raw bits
	wide      bool    // 16-bit deltas of time (less one) and price, as putWide writes
}

// span is a range of prices.
type span struct{ lo, hi float64 }

const (
	rawDigits = -1
	maxDigits = 9 // AWS quotes 6 decimals, Azure's retail prices a few more
)

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// NewSeries returns the series of the points, in any order, a later value for a second
// winning; it keeps neither slice.
func NewSeries(at []int64, usd []float64) Series { return Series{}.Merge(at, usd) }

// Len is the number of points.
func (s Series) Len() int { return len(s.blocks())*blockLen + len(s.tail) }

// Size is the bytes the series' arrays hold, spare capacity included.
func (s Series) Size() int {
	const sealedSize, blockSize, spanSize, pointSize = 72, 56, 16, 16
	n := cap(s.tail) * pointSize
	if s.sealed != nil {
		n += sealedSize + cap(s.sealed.blocks)*blockSize + cap(s.sealed.data) + cap(s.sealed.tree)*spanSize
	}
	return n
}

// Last returns the newest point.
func (s Series) Last() (at int64, usd float64, ok bool) {
	if n := len(s.tail); n > 0 {
		return s.tail[n-1].at, s.tail[n-1].usd, true
	}
	if b := s.blocks(); len(b) > 0 {
		return b[len(b)-1].t1, b[len(b)-1].p1, true
	}
	return 0, 0, false
}

// Point returns the i-th point, oldest first; it decodes a block, so loops use All.
func (s Series) Point(i int) (at int64, usd float64) {
	k, j := i/blockLen, i%blockLen
	var sc scratch
	a, u := s.segment(k, &sc)
	return a[j], u[j]
}

// PriceAt returns the price in force at t: the last point at or before t.
func (s Series) PriceAt(t int64) (float64, bool) {
	k := s.segmentAt(t)
	if k < 0 {
		return 0, false
	}
	var sc scratch
	a, u := s.segment(k, &sc)
	return u[lastAtOrBefore(a, t)], true
}

// All yields every point, oldest first.
func (s Series) All() iter.Seq2[int64, float64] { return s.Window(math.MinInt64, math.MaxInt64) }

// Window yields the point in force at from (with its own time), then those in (from, to].
func (s Series) Window(from, to int64) iter.Seq2[int64, float64] {
	return func(yield func(int64, float64) bool) {
		k := max(s.segmentAt(from), 0)
		var sc scratch
		for ; k < s.segments(); k++ {
			a, u := s.segment(k, &sc)
			i := 0
			if len(a) > 0 && a[0] <= from {
				i = lastAtOrBefore(a, from)
			}
			for ; i < len(a); i++ {
				if a[i] > to {
					return
				}
				if !yield(a[i], u[i]) {
					return
				}
			}
		}
	}
}

// WindowStats are a series' figures over [From, To].
type WindowStats struct {
	Min, Max    float64
	Avg         float64 // time-weighted
	First, Last float64 // the prices in force at From and at To
	Points      int     // observations inside the window
	OK          bool
}

// Stats computes the figures over [from, to], leaving out any time before the first point.
// It decodes at most two blocks, however long the window.
func (s Series) Stats(from, to int64) WindowStats {
	var w WindowStats
	if to <= from || s.Len() == 0 {
		return w
	}
	start := from
	ks := s.segmentAt(from)
	if ks < 0 {
		ks = 0
		start = s.firstAt()
		if start > to {
			return w
		}
	}
	ke := s.segmentAt(to)
	var scS, scE scratch
	aS, uS := s.segment(ks, &scS)
	aE, uE := aS, uS
	if ke != ks {
		aE, uE = s.segment(ke, &scE)
	}
	i, j := lastAtOrBefore(aS, start), lastAtOrBefore(aE, to)
	w.First, w.Last = uS[i], uE[j]
	w.Points = (ke*blockLen + j) - (ks*blockLen + i) + 1
	if aS[i] < start {
		w.Points-- // the price in force at from was set before the window
	}
	if ks == ke {
		w.Min, w.Max = minMax(uS[i : j+1])
	} else {
		w.Min, w.Max = minMax(uS[i:])
		lo, hi := minMax(uE[:j+1])
		w.Min, w.Max = min(w.Min, lo), max(w.Max, hi)
		if ks+1 < ke {
			r := s.blockRange(ks+1, ke)
			w.Min, w.Max = min(w.Min, r.lo), max(w.Max, r.hi)
		}
	}
	if to > start {
		area := s.areaTo(ke, aE, uE, j, to) - s.areaTo(ks, aS, uS, i, start)
		w.Avg = area / float64(to-start)
	} else {
		w.Avg = w.Last
	}
	w.OK = true
	return w
}

// areaTo is the area from the first point to t, in force at t the i-th point of segment k.
func (s Series) areaTo(k int, a []int64, u []float64, i int, t int64) float64 {
	area := s.segmentArea(k)
	for m := 0; m < i; m++ {
		area += u[m] * float64(a[m+1]-a[m])
	}
	return area + u[i]*float64(t-a[i])
}

// Downsample reduces [from, to] to cols columns' minima and maxima, so that a short spike
// still shows; a column before the first point is NaN.
func (s Series) Downsample(from, to int64, cols int) (mins, maxs []float64) {
	if cols <= 0 || to <= from {
		return nil, nil
	}
	mins = make([]float64, cols)
	maxs = make([]float64, cols)
	span := float64(to - from)
	nseg, blocks := s.segments(), s.blocks()
	// d holds decoded segment dk; the next point is the i-th of segment k.
	var d scratch
	dk := -1
	var a []int64
	var u []float64
	for c := range cols {
		c0 := from + int64(span*float64(c)/float64(cols))
		c1 := from + int64(span*float64(c+1)/float64(cols))
		lo, hi := math.NaN(), math.NaN()
		k, i := s.segmentAt(c0), 0
		if k >= 0 {
			if k != dk {
				a, u = s.segment(k, &d)
				dk = k
			}
			i = lastAtOrBefore(a, c0)
			lo, hi = u[i], u[i]
			i++
		} else {
			k = 0
		}
		for k < nseg {
			if i == 0 && k < len(blocks) && blocks[k].t0 > c0 && blocks[k].t1 < c1 {
				// a whole block inside the column: its header says
				r := s.sealed.tree[len(blocks)+k]
				if math.IsNaN(lo) {
					lo, hi = r.lo, r.hi
				} else {
					lo, hi = min(lo, r.lo), max(hi, r.hi)
				}
				k++
				continue
			}
			if k != dk {
				a, u = s.segment(k, &d)
				dk = k
			}
			for ; i < len(a) && a[i] < c1; i++ {
				if p := u[i]; math.IsNaN(lo) {
					lo, hi = p, p
				} else {
					lo, hi = min(lo, p), max(hi, p)
				}
			}
			if i < len(a) {
				break
			}
			k, i = k+1, 0
		}
		mins[c], maxs[c] = lo, hi
	}
	return mins, maxs
}

// Merge returns s with the points added, a later value for a second winning. Points all
// newer than s's last are appended past s's lengths; others rebuild in new arrays.
func (s Series) Merge(at []int64, usd []float64) Series {
	if len(at) == 0 {
		return s
	}
	if !Ascending(at) {
		at, usd = SortPoints(at, usd)
	}
	if last, _, ok := s.Last(); ok && at[0] <= last {
		return s.rebuild(at, usd)
	}
	if s.Len() == 0 {
		return build(at, usd)
	}
	return s.appendPoints(at, usd)
}

// Join returns s with o's points added, o winning ties; o itself when s is empty.
func (s Series) Join(o Series) Series {
	if s.Len() == 0 {
		return o
	}
	if o.Len() == 0 {
		return s
	}
	return s.Merge(o.Points(0))
}

// Points returns the points from the i-th on, oldest first, in new slices.
func (s Series) Points(i int) ([]int64, []float64) {
	at := make([]int64, 0, max(s.Len()-i, 0))
	usd := make([]float64, 0, cap(at))
	var sc scratch
	for k := i / blockLen; k < s.segments(); k++ {
		a, u := s.segment(k, &sc)
		lo := max(i-k*blockLen, 0)
		at, usd = append(at, a[lo:]...), append(usd, u[lo:]...)
	}
	return at, usd
}

// DropBefore returns s without the points before the one in force at t, in new arrays.
func (s Series) DropBefore(t int64) Series {
	k := s.segmentAt(t)
	if k < 0 {
		return s
	}
	var sc scratch
	a, _ := s.segment(k, &sc)
	first := k*blockLen + lastAtOrBefore(a, t)
	if first == 0 {
		return s
	}
	return build(s.Points(first))
}

// Ascending reports whether times strictly ascend, as a series holds them.
func Ascending(at []int64) bool {
	for i := 1; i < len(at); i++ {
		if at[i] <= at[i-1] {
			return false
		}
	}
	return true
}

// SortPoints sorts points by time into new slices, unique, a later value for a second winning.
func SortPoints(at []int64, usd []float64) ([]int64, []float64) {
	idx := make([]int, len(at))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return at[idx[a]] < at[idx[b]] })
	sa := make([]int64, 0, len(at))
	su := make([]float64, 0, len(at))
	for _, i := range idx {
		if n := len(sa); n > 0 && sa[n-1] == at[i] {
			su[n-1] = usd[i]
			continue
		}
		sa, su = append(sa, at[i]), append(su, usd[i])
	}
	return sa, su
}

// rebuild merges sorted points into s's in new arrays, the new value winning a tie.
func (s Series) rebuild(at []int64, usd []float64) Series {
	n := s.Len() + len(at)
	ma := make([]int64, 0, n)
	mu := make([]float64, 0, n)
	j := 0
	for t, p := range s.All() {
		for ; j < len(at) && at[j] < t; j++ {
			ma, mu = append(ma, at[j]), append(mu, usd[j])
		}
		if j < len(at) && at[j] == t {
			p = usd[j]
			j++
		}
		ma, mu = append(ma, t), append(mu, p)
	}
	ma, mu = append(ma, at[j:]...), append(mu, usd[j:]...)
	return build(ma, mu)
}

// build makes a series of sorted, unique points in arrays sized to fit.
func build(at []int64, usd []float64) Series {
	s, _ := buildBlocks(at, func(dst []byte, lo int, area float64) (block, span, []byte, bool) {
		b, r, d := encodeBlock(dst, at[lo:lo+blockLen], usd[lo:lo+blockLen], area)
		return b, r, d, true
	}, func(i int) float64 { return usd[i] })
	return s
}

// blockEncoder encodes the block of points from the lo-th into dst; !ok gives up the series.
type blockEncoder func(dst []byte, lo int, area float64) (b block, r span, data []byte, ok bool)

// buildBlocks is build over an encoder, price giving the tail's; !ok if the encoder gave up.
func buildBlocks(at []int64, encode blockEncoder, price func(i int) float64) (Series, bool) {
	nb := len(at) / blockLen
	var s Series
	if nb > 0 {
		sl := &sealed{blocks: make([]block, 0, nb), tree: make([]span, 2*nb)}
		buf := encodeBuf.Get().(*[]byte)
		data := (*buf)[:0]
		area := 0.0
		for k := range nb {
			lo := k * blockLen
			if k > 0 {
				prev := &sl.blocks[k-1]
				area = prev.cum + prev.area + prev.p1*float64(at[lo]-prev.t1)
			}
			b, r, d, ok := encode(data, lo, area)
			if !ok {
				*buf = data[:0]
				encodeBuf.Put(buf)
				return Series{}, false
			}
			sl.blocks, data = append(sl.blocks, b), d
			sl.tree[nb+k] = r
		}
		fillTree(sl.tree)
		sl.data = slices.Clone(data)
		*buf = data
		encodeBuf.Put(buf)
		s.sealed = sl
	}
	if rest := len(at) - nb*blockLen; rest > 0 {
		s.tail = make([]point, rest)
		for i := range rest {
			s.tail[i] = point{at[nb*blockLen+i], price(nb*blockLen + i)}
		}
		s.tailArea = s.nextArea(s.tail[0].at)
	}
	return s, true
}

// encodeBuf holds scratch buffers for build, which copies the result to its exact size.
var encodeBuf = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// appendPoints appends sorted points newer than s's last.
func (s Series) appendPoints(at []int64, usd []float64) Series {
	if len(s.tail)+len(at) < blockLen {
		// The live tick's common case: the points fit the tail.
		if len(s.tail) == 0 {
			s.tail = nil // a sealed tail's array belongs to readers
			s.tailArea = s.nextArea(at[0])
		}
		if c := len(s.tail) + len(at); c > cap(s.tail) {
			// Grow into a new array, never in place: a reader may hold s.
			c = min(max(c, 2*len(s.tail), 16), blockLen)
			s.tail = append(make([]point, 0, c), s.tail...)
		}
		for i := range at {
			s.tail = append(s.tail, point{at[i], usd[i]})
		}
		return s
	}
	// Seal the tail and the points in whole blocks; the rest is the new tail.
	ta, tu := make([]int64, len(s.tail), len(s.tail)+len(at)), make([]float64, len(s.tail), len(s.tail)+len(at))
	for i, p := range s.tail {
		ta[i], tu[i] = p.at, p.usd
	}
	at, usd = append(ta, at...), append(tu, usd...)
	nb := len(at) / blockLen
	more, ranges := make([]block, 0, nb), make([]span, 0, nb)
	var data []byte
	area := s.nextArea(at[0])
	for k := range nb {
		lo := k * blockLen
		if k > 0 {
			prev := &more[k-1]
			area = prev.cum + prev.area + prev.p1*float64(at[lo]-prev.t1)
		}
		b, r, d := encodeBlock(data, at[lo:lo+blockLen], usd[lo:lo+blockLen], area)
		more, ranges, data = append(more, b), append(ranges, r), d
	}
	s.sealed, s.tail = s.sealed.with(more, ranges, data), nil // the tail's array belongs to readers now
	if rest := nb * blockLen; rest < len(at) {
		return s.appendPoints(at[rest:], usd[rest:])
	}
	return s
}

// with returns sl followed by more: arrays appended past readers' lengths, a new tree.
func (sl *sealed) with(more []block, ranges []span, data []byte) *sealed {
	var n sealed
	if sl != nil {
		n = *sl
	}
	base := uint32(len(n.data))
	for i := range more {
		more[i].off += base
	}
	if len(n.data)+len(data) > cap(n.data) {
		n.data = append(make([]byte, 0, grow(len(n.data), len(data))), n.data...)
	}
	n.data = append(n.data, data...)
	if len(n.blocks)+len(more) > cap(n.blocks) {
		n.blocks = append(make([]block, 0, grow(len(n.blocks), len(more))), n.blocks...)
	}
	n.blocks = append(n.blocks, more...)
	// A new tree, since readers keep theirs; old leaves are copied.
	nb, oldN := len(n.blocks), len(n.blocks)-len(more)
	old := n.tree
	n.tree = make([]span, 2*nb)
	copy(n.tree[nb:], old[oldN:])
	copy(n.tree[nb+oldN:], ranges)
	fillTree(n.tree)
	return &n
}

// fillTree computes a bottom-up segment tree's inner nodes from its leaves (the second half).
func fillTree(tree []span) {
	for i := len(tree)/2 - 1; i > 0; i-- {
		l, r := tree[2*i], tree[2*i+1]
		tree[i] = span{min(l.lo, r.lo), max(l.hi, r.hi)}
	}
}

// blockRange is the lowest and highest price of blocks [a, b).
func (s Series) blockRange(a, b int) span {
	r := span{math.Inf(1), math.Inf(-1)}
	tree := s.sealed.tree
	nb := len(s.sealed.blocks)
	for a, b = a+nb, b+nb; a < b; a, b = a/2, b/2 {
		if a&1 == 1 {
			r = span{min(r.lo, tree[a].lo), max(r.hi, tree[a].hi)}
			a++
		}
		if b&1 == 1 {
			b--
			r = span{min(r.lo, tree[b].lo), max(r.hi, tree[b].hi)}
		}
	}
	return r
}

// nextArea is the area from the first point to t, for t after every sealed block.
func (s Series) nextArea(t int64) float64 {
	blocks := s.blocks()
	if len(blocks) == 0 {
		return 0
	}
	b := &blocks[len(blocks)-1]
	return b.cum + b.area + b.p1*float64(t-b.t1)
}

// segments counts the sealed blocks and the tail, if any.
func (s Series) segments() int {
	if len(s.tail) > 0 {
		return len(s.blocks()) + 1
	}
	return len(s.blocks())
}

// segmentArea is the area from the first point to segment k.
func (s Series) segmentArea(k int) float64 {
	if blocks := s.blocks(); k < len(blocks) {
		return blocks[k].cum
	}
	return s.tailArea
}

// firstAt is the first point's time; the series must not be empty.
func (s Series) firstAt() int64 {
	if blocks := s.blocks(); len(blocks) > 0 {
		return blocks[0].t0
	}
	return s.tail[0].at
}

// segmentAt returns the segment holding the point in force at t, -1 before the first point.
func (s Series) segmentAt(t int64) int {
	blocks := s.blocks()
	if len(s.tail) > 0 && s.tail[0].at <= t {
		return len(blocks)
	}
	return sort.Search(len(blocks), func(k int) bool { return blocks[k].t0 > t }) - 1
}

// lastAtOrBefore returns the index of the last time at or before t, which a[0] must be.
func lastAtOrBefore(a []int64, t int64) int {
	return sort.Search(len(a), func(i int) bool { return a[i] > t }) - 1
}

func minMax(u []float64) (lo, hi float64) {
	lo, hi = u[0], u[0]
	for _, p := range u[1:] {
		if p < lo {
			lo = p
		}
		if p > hi {
			hi = p
		}
	}
	return lo, hi
}

// scratch holds one decoded block.
type scratch struct {
	at  [blockLen]int64
	usd [blockLen]float64
}

// segment returns the points of segment k (a block or the tail), decoded into sc.
func (s Series) segment(k int, sc *scratch) ([]int64, []float64) {
	blocks := s.blocks()
	if k >= len(blocks) {
		for i, p := range s.tail {
			sc.at[i], sc.usd[i] = p.at, p.usd
		}
		return sc.at[:len(s.tail)], sc.usd[:len(s.tail)]
	}
	b := &blocks[k]
	decodeBlock(b, s.sealed.data[b.off:], sc)
	return sc.at[:], sc.usd[:]
}

// encodeBlock appends blockLen sorted points to dst and returns their header and price range:
// as ticks of the fewest decimals that give every price back, else as raw bits.
func encodeBlock(dst []byte, at []int64, usd []float64, area float64) (block, span, []byte) {
	at, usd = at[:blockLen], usd[:blockLen]
	var q [blockLen]int64
	if digits, ok := ticksOf(usd, &q); ok {
		if b, r, out, ok := encodeTicks(dst, at, q[:], digits, area); ok {
			return b, r, out
		}
	}
	b := block{t0: at[0], t1: at[blockLen-1], p0: usd[0], p1: usd[blockLen-1], cum: area, off: uint32(len(dst)), digits: rawDigits}
	r := span{usd[0], usd[0]}
	// At most 10 bytes of time and 8 of price a point: grow once, write by index.
	n := len(dst)
	dst = slices.Grow(dst, 18*blockLen)[:n+18*blockLen]
	for i := 1; i < blockLen; i++ {
		p := usd[i]
		b.area += usd[i-1] * float64(at[i]-at[i-1])
		if p < r.lo {
			r.lo = p
		}
		if p > r.hi {
			r.hi = p
		}
		n = putUvarint(dst, n, uint64(at[i]-at[i-1]))
		binary.LittleEndian.PutUint64(dst[n:], math.Float64bits(p))
		n += 8
	}
	return b, r, dst[:n]
}

// ticksOf sets q to the prices in ticks of the fewest decimals that give every
// one back and returns those decimals; !ok when no decimals up to maxDigits do.
func ticksOf(usd []float64, q *[blockLen]int64) (digits int8, ok bool) {
	for i := 0; i < len(usd); i++ {
		if q[i], ok = quantize(usd[i], digits); ok {
			continue
		}
		// usd[i] needs more decimals: find them, then quantize the earlier prices again.
		for ; !ok; q[i], ok = quantize(usd[i], digits) {
			if digits++; digits > maxDigits {
				return 0, false
			}
		}
		i = -1
	}
	return digits, true
}

// putUvarint writes x at dst[n:] as binary.Uvarint reads it and returns the next index.
func putUvarint(dst []byte, n int, x uint64) int {
	for x >= 0x80 {
		dst[n] = byte(x) | 0x80
		x >>= 7
		n++
	}
	dst[n] = byte(x)
	return n + 1
}

// decodeBlock decodes a block whose encoded points start at data[0].
func decodeBlock(b *block, data []byte, sc *scratch) {
	t, p := b.t0, b.p0
	sc.at[0], sc.usd[0] = t, p
	off := 0
	if b.digits == rawDigits {
		for i := 1; i < blockLen; i++ {
			dt, n := binary.Uvarint(data[off:])
			t += int64(dt)
			sc.at[i] = t
			sc.usd[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[off+n:]))
			off += n + 8
		}
		return
	}
	scale := pow10[b.digits]
	q, _ := quantize(p, b.digits)
	if b.wide {
		data = data[:4*(blockLen-1)]
		for i := 1; i < blockLen; i++ {
			w := binary.LittleEndian.Uint32(data[4*(i-1):])
			t += int64(uint16(w)) + 1
			q += int64(int16(w >> 16))
			sc.at[i] = t
			sc.usd[i] = float64(q) / scale
		}
		return
	}
	for i := 1; i < blockLen; i++ {
		dt, n := binary.Uvarint(data[off:])
		off += n
		dq, n := binary.Varint(data[off:])
		off += n
		t += int64(dt)
		q += dq
		sc.at[i] = t
		sc.usd[i] = float64(q) / scale
	}
}

// quantize returns p in units of 10^-digits when that gives p back exactly; a rounding
// miss fails the check and costs decimals, never a wrong price.
func quantize(p float64, digits int8) (int64, bool) {
	scale := pow10[digits]
	x := p * scale
	if !(x < 1<<53 && x > -(1<<53)) {
		return 0, false
	}
	var q int64
	if x >= 0 {
		q = int64(x + 0.5)
	} else {
		q = int64(x - 0.5)
	}
	return q, float64(q)/scale == p
}

// grow picks a capacity for n+extra: an eighth spare, since doubling a back-fill wastes half.
func grow(n, extra int) int { return max(n+extra, n+n/8, 16) }
