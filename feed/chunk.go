package feed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpumarket/gpumarket/series"
)

// A chunk is one pool's points of one UTC day: a version byte, the count, then
// each point's time (a signed varint, then unsigned steps) and its float64
// price. About 10 bytes a point, decoded without allocation.
const chunkVersion = 1

const daySeconds = 24 * 60 * 60

func dayOf(at int64) int64 {
	d := at / daySeconds
	if at < 0 && at%daySeconds != 0 {
		d--
	}
	return d
}

var errChunk = errors.New("damaged price chunk")

// encodeChunk packs points, ascending and unique in at.
func encodeChunk(at []int64, usd []float64) []byte {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(at)*10)
	buf = append(buf, chunkVersion)
	buf = binary.AppendUvarint(buf, uint64(len(at)))
	for i := range at {
		if i == 0 {
			buf = binary.AppendVarint(buf, at[0])
		} else {
			buf = binary.AppendUvarint(buf, uint64(at[i]-at[i-1]))
		}
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(usd[i]))
	}
	return buf
}

func chunkLen(b []byte) (int, error) {
	if len(b) < 2 || b[0] != chunkVersion {
		return 0, errChunk
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b))/9 {
		return 0, errChunk
	}
	return int(n), nil
}

// appendChunk decodes a chunk onto at and usd, refusing anything encodeChunk
// would not write.
func appendChunk(at []int64, usd []float64, b []byte) ([]int64, []float64, error) {
	n, err := chunkLen(b)
	if err != nil {
		return at, usd, err
	}
	_, k := binary.Uvarint(b[1:])
	p := 1 + k
	var t int64
	for i := 0; i < n; i++ {
		if i == 0 {
			v, k := binary.Varint(b[p:])
			if k <= 0 {
				return at, usd, errChunk
			}
			t, p = v, p+k
		} else {
			d, k := binary.Uvarint(b[p:])
			if k <= 0 || d == 0 || d > math.MaxInt64/2 || t > math.MaxInt64-int64(d) {
				return at, usd, errChunk
			}
			t, p = t+int64(d), p+k
		}
		if len(b)-p < 8 {
			return at, usd, errChunk
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[p:]))
		p += 8
		if !(v >= 0) || math.IsInf(v, 0) {
			return at, usd, fmt.Errorf("%w: price %v", errChunk, v)
		}
		at, usd = append(at, t), append(usd, v)
	}
	if p != len(b) {
		return at, usd, errChunk
	}
	return at, usd, nil
}

// mergePoints merges b's points into a's, b's winning for the same second.
func mergePoints(aAt []int64, aUSD []float64, bAt []int64, bUSD []float64) ([]int64, []float64) {
	return series.SortPoints(slices.Concat(aAt, bAt), slices.Concat(aUSD, bUSD))
}
