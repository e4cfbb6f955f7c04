package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"
)

// ClockFile records a fast clock's origin and speed in the data dir, for every process on it.
const ClockFile = "sim-clock.json"

// Clock is the wall clock, or one running Speed times faster from an origin
// recorded in the data dir: origin + Speed × (wall time since the origin).
type Clock struct {
	origin time.Time
	speed  int
	wall   func() time.Time
}

type clockRecord struct {
	Speed  int       `json:"speed"`
	Origin time.Time `json:"origin"`
}

// SpeedMismatchError refuses a data dir recorded at another speed: two clocks would move its time backwards.
type SpeedMismatchError struct {
	Dir          string
	Recorded     int
	Origin       time.Time
	Asked        int
	RecordedFile string
}

func (e *SpeedMismatchError) Error() string {
	return fmt.Sprintf("the data dir %s runs the simulated market at %d× since %s (%s); this run asks for %d×: "+
		"set GPUMARKET_SIM_SPEED=%d (or sim.speed), or use another data dir (GPUMARKET_DATA_DIR)",
		e.Dir, e.Recorded, e.Origin.UTC().Format(time.RFC3339), e.RecordedFile, e.Asked, e.Recorded)
}

// OpenClock returns the data dir's clock at speed: the wall clock at 1 with no
// record, else the recorded origin; another speed's record is a *SpeedMismatchError.
func OpenClock(dir string, speed int) (*Clock, error) {
	return openClock(dir, speed, time.Now)
}

func openClock(dir string, speed int, wall func() time.Time) (*Clock, error) {
	if speed < 1 {
		return nil, fmt.Errorf("sim clock speed %d; want 1 or more", speed)
	}
	path := filepath.Join(dir, ClockFile)
	rec, err := readClock(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && speed == 1:
		return &Clock{speed: 1, wall: wall}, nil
	case errors.Is(err, fs.ErrNotExist):
		if rec, err = recordClock(dir, path, clockRecord{Speed: speed, Origin: wall().UTC()}); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	if rec.Speed != speed {
		return nil, &SpeedMismatchError{Dir: dir, Recorded: rec.Speed, Origin: rec.Origin, Asked: speed, RecordedFile: path}
	}
	return &Clock{origin: rec.Origin, speed: rec.Speed, wall: wall}, nil
}

func readClock(path string) (clockRecord, error) {
	var rec clockRecord
	data, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.Speed < 1 || rec.Origin.IsZero() {
		return rec, fmt.Errorf("%s is not a simulated clock's record (want {\"speed\": N, \"origin\": RFC 3339}); move it aside to start the clock again", path)
	}
	return rec, nil
}

// recordClock writes the record whole and links it into place, so of two
// processes starting at once one record wins.
func recordClock(dir, path string, rec clockRecord) (clockRecord, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return rec, err
	}
	data, _ := json.Marshal(rec)
	tmp, err := os.CreateTemp(dir, ClockFile+".*")
	if err != nil {
		return rec, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rec, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return rec, fmt.Errorf("record the simulated clock: %w", err)
	}
	return readClock(path)
}

// Now is the simulated time, held at what a time.Duration reaches.
func (c *Clock) Now() time.Time {
	w := c.wall()
	if c.speed == 1 {
		return w
	}
	since := w.Sub(c.origin)
	if float64(since)*float64(c.speed) >= math.MaxInt64 {
		return c.origin.Add(math.MaxInt64)
	}
	return c.origin.Add(since * time.Duration(c.speed)).In(w.Location())
}

// Speed is how many times faster than the wall clock the clock runs.
func (c *Clock) Speed() int { return c.speed }
