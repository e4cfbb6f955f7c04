package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// handClock is a wall clock the test moves.
type handClock struct {
	mu sync.Mutex
	t  time.Time
}

func (h *handClock) now() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.t }
func (h *handClock) add(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t = h.t.Add(d)
}

// At speed 1 with no record the clock is the wall clock and nothing is
// written in the data dir.
func TestClockAtSpeedOneIsTheWallClock(t *testing.T) {
	dir := t.TempDir()
	wall := &handClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	c, err := openClock(dir, 1, wall.now)
	if err != nil {
		t.Fatal(err)
	}
	wall.add(time.Hour)
	if !c.Now().Equal(wall.now()) {
		t.Errorf("now %s, wall %s", c.Now(), wall.now())
	}
	if _, err := os.Stat(filepath.Join(dir, ClockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("speed 1 wrote a record: %v", err)
	}
}

// The first use records the origin; a later open (another process) keeps
// it, and both read the same simulated time, Speed times the wall time
// since the origin.
func TestClockOriginKeptAndTwoProcessesAgree(t *testing.T) {
	dir := t.TempDir()
	wall := &handClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	origin := wall.now()
	first, err := openClock(dir, 7200, wall.now)
	if err != nil {
		t.Fatal(err)
	}
	wall.add(10 * time.Second)
	second, err := openClock(dir, 7200, wall.now)
	if err != nil {
		t.Fatal(err)
	}
	if !second.origin.Equal(origin) {
		t.Errorf("second open's origin %s, want the first's %s", second.origin, origin)
	}
	want := origin.Add(20 * time.Hour) // 10 s × 7200
	if a, b := first.Now(), second.Now(); !a.Equal(want) || !b.Equal(want) {
		t.Errorf("clocks read %s and %s, want %s", a, b, want)
	}
	wall.add(time.Second)
	if got := second.Now().Sub(want); got != 2*time.Hour {
		t.Errorf("a wall second moved the clock %s, want 2h", got)
	}
}

// A data dir recorded at one speed refuses another, 1 included, and says
// how to go on.
func TestClockSpeedMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenClock(dir, 7200); err != nil {
		t.Fatal(err)
	}
	for _, speed := range []int{1, 60} {
		_, err := OpenClock(dir, speed)
		var mm *SpeedMismatchError
		if !errors.As(err, &mm) || mm.Recorded != 7200 || mm.Asked != speed {
			t.Fatalf("speed %d: %v, want a mismatch", speed, err)
		}
		for _, w := range []string{"7200×", "GPUMARKET_SIM_SPEED=7200", "GPUMARKET_DATA_DIR", dir} {
			if !contains(err.Error(), w) {
				t.Errorf("speed %d: %q lacks %q", speed, err, w)
			}
		}
	}
	// A damaged record is said, not taken for a fresh start.
	if err := os.WriteFile(filepath.Join(dir, ClockFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenClock(dir, 7200); err == nil || !contains(err.Error(), "move it aside") {
		t.Errorf("damaged record: %v", err)
	}
}

// Processes starting at once on a fresh data dir share one origin.
func TestClockConcurrentFirstUseSharesOneOrigin(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	origins := make([]time.Time, 8)
	errs := make([]error, 8)
	for i := range origins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wall := func() time.Time { return time.Date(2026, 12, 6, 12, 0, i, 0, time.UTC) }
			c, err := openClock(dir, 600, wall)
			errs[i] = err
			if err == nil {
				origins[i] = c.origin
			}
		}()
	}
	wg.Wait()
	for i := range origins {
		if errs[i] != nil || !origins[i].Equal(origins[0]) {
			t.Errorf("process %d: origin %s %v, want %s", i, origins[i], errs[i], origins[0])
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// WallClock is the clock at speed 1: time.Now.
func WallClock() *Clock { return &Clock{speed: 1, wall: time.Now} }
