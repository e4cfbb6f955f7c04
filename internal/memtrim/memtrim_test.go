package memtrim

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return n << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseDropsTheImageAndTheProgramRunsOn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux drops the image")
	}
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	before := rssFile(t)
	dropped := Release()
	after := rssFile(t)
	if dropped <= 0 {
		t.Fatalf("Release dropped %d bytes of the binary", dropped)
	}
	if after >= before {
		t.Fatalf("file-backed RSS %d KiB before, %d KiB after Release", before>>10, after>>10)
	}
	// The code and data it dropped come back intact on the next touch.
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if got := len(sb.String()); got != 2890 {
		t.Fatalf("after Release the program computes %d, want 2890", got)
	}
	if Release() < 0 {
		t.Fatal("a second Release failed")
	}
}
