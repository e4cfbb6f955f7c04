package memtrim

import (
	"reflect"
	"strings"
	"testing"
)

// The layout of /proc/PID/smaps: proc(5), "/proc/pid/smaps".
const sample = `00400000-033cc000 r-xp 00000000 fe:00 1234 /usr/bin/gm
Size:              49936 kB
Rss:               19824 kB
Anonymous:             0 kB
033cc000-05bba000 r--p 02fcc000 fe:00 1234 /usr/bin/gm
Rss:               25848 kB
Anonymous:             0 kB
05bba000-05dce000 rw-p 057ba000 fe:00 1234 /usr/bin/gm
Rss:                1680 kB
Anonymous:           400 kB
05dce000-05df0000 r--p 059ce000 fe:00 1234 /usr/bin/gm
Rss:                  64 kB
Anonymous:            64 kB
05df0000-08076000 rw-p 00000000 00:00 0
Anonymous:           464 kB
7f0c70a02000-7f0c70b58000 r-xp 00028000 fe:00 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0c70b58000-7f0c70b60000 r--p 00028000 fe:00 77 /usr/bin/gm (deleted)
Anonymous:             0 kB
`

func TestDroppableKeepsWhatDiffersFromTheFile(t *testing.T) {
	got := droppable(strings.NewReader(sample), "/usr/bin/gm")
	want := []span{{0x00400000, 0x033cc000}, {0x033cc000, 0x05bba000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("droppable = %x, want the code and read-only data only: %x", got, want)
	}
	if got := droppable(strings.NewReader(sample), "/usr/bin/other"); got != nil {
		t.Fatalf("droppable of another program = %x, want none", got)
	}
}
