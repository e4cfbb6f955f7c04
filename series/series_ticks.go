package series

import (
	"encoding/binary"
	"slices"
)

// NewSeriesOfTicks is NewSeries of the prices ticks[i]/10^digits, equal to the bit; ascending
// times with digits ≤ 9 take a faster path (no search for decimals, wide blocks).
func NewSeriesOfTicks(at, ticks []int64, digits int) Series {
	if len(at) != len(ticks) {
		panic("series.NewSeriesOfTicks: at and ticks differ in length")
	}
	if digits >= 0 && digits <= maxDigits {
		if s, ok := buildTicks(at, ticks, int8(digits)); ok {
			return s
		}
	}
	usd := make([]float64, len(ticks))
	scale := tickScale(digits)
	for i, q := range ticks {
		usd[i] = float64(q) / scale
	}
	return NewSeries(at, usd)
}

// tickScale is 10^digits.
func tickScale(digits int) float64 {
	if digits >= 0 && digits < len(pow10) {
		return pow10[digits]
	}
	s := 1.0
	for range digits {
		s *= 10
	}
	for range -digits {
		s /= 10
	}
	return s
}

// maxTicks keeps ticks well inside a float64's integers, so quantize finds them again.
const maxTicks = 1 << 50

// buildTicks is build for ticks; !ok when times do not ascend or a tick is out of bounds.
func buildTicks(at, ticks []int64, digits int8) (Series, bool) {
	scale := pow10[digits]
	for i := (len(at) / blockLen) * blockLen; i < len(at); i++ {
		// the tail, which no block encoder sees
		if i > 0 && at[i] <= at[i-1] || ticks[i] >= maxTicks || ticks[i] <= -maxTicks {
			return Series{}, false
		}
	}
	return buildBlocks(at, func(dst []byte, lo int, area float64) (block, span, []byte, bool) {
		if lo > 0 && at[lo] <= at[lo-1] {
			return block{}, span{}, nil, false
		}
		return encodeTicks(dst, at[lo:lo+blockLen], ticks[lo:lo+blockLen], digits, area)
	}, func(i int) float64 { return float64(ticks[i]) / scale })
}

var pow10i = [...]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// encodeTicks is encodeBlock for ticks, as a wide block when every delta fits 16 bits
// (at four decimals, a move under $3.27), else as encodeVarintTicks writes it.
func encodeTicks(dst []byte, at, q []int64, digits int8, cum float64) (block, span, []byte, bool) {
	at, q = at[:blockLen], q[:blockLen]
	scale := pow10[digits]
	b := block{t0: at[0], t1: at[blockLen-1], p0: float64(q[0]) / scale, p1: float64(q[blockLen-1]) / scale,
		cum: cum, off: uint32(len(dst)), digits: digits, wide: true}
	n0 := len(dst)
	const size = 4 * (blockLen - 1)
	dst = slices.Grow(dst, size)[:n0+size]
	area, lo, hi, out := putWide((*[size]byte)(dst[n0:]), (*[blockLen]int64)(at), (*[blockLen]int64)(q), scale)
	if lo <= -maxTicks || hi >= maxTicks {
		return block{}, span{}, nil, false
	}
	if out>>16 != 0 {
		return encodeVarintTicks(dst[:n0], at, q, digits, cum)
	}
	b.area = area
	// Division by a power of ten is monotonic: the lowest tick is the lowest price.
	return b, span{float64(lo) / scale, float64(hi) / scale}, dst, true
}

// putWide writes a wide block's points, with out>>16 nonzero when a delta does not fit.
// A function of its own so that its loop has the registers to itself.
func putWide(w *[4 * (blockLen - 1)]byte, at, q *[blockLen]int64, scale float64) (area float64, lo, hi int64, out uint64) {
	prev := float64(q[0]) / scale
	lo, hi = q[0], q[0]
	for i := 1; i < blockLen; i++ {
		dt, d := at[i]-at[i-1], q[i]-q[i-1]
		area += prev * float64(dt)
		prev = float64(q[i]) / scale
		lo, hi = min(lo, q[i]), max(hi, q[i])
		// dt-1 in [0, 1<<16) and d in [-1<<15, 1<<15) fit
		out |= uint64(dt-1) | uint64(d+1<<15)
		binary.LittleEndian.PutUint32(w[4*(i-1):], uint32(uint16(dt-1))|uint32(uint16(d))<<16)
	}
	return area, lo, hi, out
}

// encodeVarintTicks writes the bytes encodeBlock would, in one pass: the ticks' common
// trailing zeros give the fewest decimals every price needs.
func encodeVarintTicks(dst []byte, at, q []int64, digits int8, cum float64) (block, span, []byte, bool) {
	at, q = at[:blockLen], q[:blockLen]
	scale := pow10[digits]
	b := block{t0: at[0], t1: at[blockLen-1], p0: float64(q[0]) / scale, p1: float64(q[blockLen-1]) / scale,
		cum: cum, off: uint32(len(dst)), digits: digits}
	// Rarely can the block take fewer decimals: divide the zeros out into a copy.
	var fewer [blockLen]int64
	qs := q
	if z := commonZeros(q, digits); z > 0 {
		for i, x := range q {
			fewer[i] = x / pow10i[z]
		}
		qs, b.digits = fewer[:], digits-z
	}
	n0 := len(dst)
	// At most 10 bytes of time and 10 of price a point: grow once, write by index.
	dst = slices.Grow(dst, 20*blockLen)[:n0+20*blockLen]
	n := n0
	prev, area := b.p0, 0.0
	lo, hi := q[0], q[0]
	for i := 1; i < blockLen; i++ {
		dt := at[i] - at[i-1]
		if dt <= 0 {
			return block{}, span{}, nil, false
		}
		area += prev * float64(dt)
		prev = float64(q[i]) / scale
		lo, hi = min(lo, q[i]), max(hi, q[i])
		n = putUvarint(dst, n, uint64(dt))
		d := qs[i] - qs[i-1]
		n = putUvarint(dst, n, uint64(d<<1)^uint64(d>>63)) // zigzag, as binary.Varint reads it
	}
	b.area = area
	return b, span{float64(lo) / scale, float64(hi) / scale}, dst[:n], true
}

// commonZeros is how many trailing decimal zeros, at most digits, every tick has.
func commonZeros(q []int64, digits int8) int8 {
	var z int8
	for z < digits && q[0]%pow10i[z+1] == 0 {
		z++
	}
	for _, x := range q[1:] {
		if z == 0 {
			break
		}
		for x%pow10i[z] != 0 {
			z--
		}
	}
	return z
}
