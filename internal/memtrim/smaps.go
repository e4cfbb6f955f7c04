package memtrim

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

type span struct{ lo, hi uintptr }

// droppable lists the mappings of exe in an smaps listing that are not
// writable and hold no copied-on-write page (a PIE's relocated read-only data
// would): dropping them loses nothing the file does not hold.
func droppable(smaps io.Reader, exe string) []span {
	var (
		out  []span
		cur  span
		ours bool
	)
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if a, b, ok := strings.Cut(fs[0], "-"); ok && len(fs) >= 5 {
			if ours {
				out = append(out, cur)
			}
			x, err1 := strconv.ParseUint(a, 16, 64)
			y, err2 := strconv.ParseUint(b, 16, 64)
			cur = span{uintptr(x), uintptr(y)}
			ours = err1 == nil && err2 == nil && y > x && len(fs) >= 6 &&
				strings.Join(fs[5:], " ") == exe && !strings.Contains(fs[1], "w")
			continue
		}
		if fs[0] == "Anonymous:" && len(fs) >= 2 && fs[1] != "0" {
			ours = false
		}
	}
	if ours {
		out = append(out, cur)
	}
	return out
}
