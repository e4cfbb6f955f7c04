package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// keptVersion is the encoding of a kept report; another version is not read.
const keptVersion = 1

// keptReport is a UsageReport as usage_kept holds it: compact JSON.
type keptReport struct {
	V                    int            `json:"v"`
	Source               string         `json:"source,omitempty"`
	Note                 string         `json:"note,omitempty"`
	InterruptionsUnknown bool           `json:"interruptions_unknown,omitempty"`
	Instances            []keptInstance `json:"instances"`
}

// keptInstance is one run; Busy holds [at, period, share], or [share] following on.
type keptInstance struct {
	ID           string          `json:"id"`
	InstanceType string          `json:"type,omitempty"`
	Zone         string          `json:"zone,omitempty"`
	Spot         bool            `json:"spot,omitempty"`
	Start        time.Time       `json:"start"`
	End          *time.Time      `json:"end,omitempty"`
	Interrupted  bool            `json:"interrupted,omitempty"`
	EndLastSeen  bool            `json:"end_last_seen,omitempty"`
	Busy         [][]json.Number `json:"busy,omitempty"`
}

// usage is the run without its samples.
func (ki keptInstance) usage() domain.InstanceUsage {
	in := domain.InstanceUsage{ID: ki.ID, InstanceType: ki.InstanceType, Zone: ki.Zone, Spot: ki.Spot, Start: ki.Start,
		Interrupted: ki.Interrupted, EndLastSeen: ki.EndLastSeen}
	if ki.End != nil {
		in.End = *ki.End
	}
	return in
}

// encodeUsage is the report as usage_kept stores it.
func encodeUsage(rep domain.UsageReport) ([]byte, error) {
	k := keptReport{V: keptVersion, Source: rep.Source, Note: rep.Note, InterruptionsUnknown: rep.InterruptionsUnknown,
		Instances: make([]keptInstance, 0, len(rep.Instances))}
	for _, in := range rep.Instances {
		ki := keptInstance{ID: in.ID, InstanceType: in.InstanceType, Zone: in.Zone, Spot: in.Spot, Start: in.Start.UTC(),
			Interrupted: in.Interrupted, EndLastSeen: in.EndLastSeen}
		if !in.End.IsZero() {
			e := in.End.UTC()
			ki.End = &e
		}
		var prev *domain.BusySample
		for i, s := range in.Busy {
			if math.IsNaN(s.Share) || math.IsInf(s.Share, 0) {
				continue // no measurement (and JSON has no NaN)
			}
			share := json.Number(strconv.FormatFloat(s.Share, 'g', -1, 64))
			if prev != nil && s.Period == prev.Period && s.At.Equal(prev.At.Add(prev.Period)) {
				ki.Busy = append(ki.Busy, []json.Number{share})
			} else {
				ki.Busy = append(ki.Busy, []json.Number{json.Number(strconv.FormatInt(s.At.UnixNano(), 10)),
					json.Number(strconv.FormatInt(int64(s.Period), 10)), share})
			}
			prev = &in.Busy[i]
		}
		k.Instances = append(k.Instances, ki)
	}
	return json.Marshal(k)
}

// errKeptVersion marks a kept report of an encoding not known here.
var errKeptVersion = errors.New("kept usage of an unknown encoding")

// decodeUsage reads what encodeUsage wrote.
func decodeUsage(b []byte) (domain.UsageReport, error) {
	var k keptReport
	if err := json.Unmarshal(b, &k); err != nil {
		return domain.UsageReport{}, err
	}
	if k.V != keptVersion {
		return domain.UsageReport{}, fmt.Errorf("%w (version %d)", errKeptVersion, k.V)
	}
	rep := domain.UsageReport{Source: k.Source, Note: k.Note, InterruptionsUnknown: k.InterruptionsUnknown,
		Instances: make([]domain.InstanceUsage, 0, len(k.Instances))}
	for _, ki := range k.Instances {
		in := ki.usage()
		if len(ki.Busy) > 0 {
			in.Busy = make([]domain.BusySample, len(ki.Busy))
		}
		for i, a := range ki.Busy {
			var s domain.BusySample
			switch {
			case len(a) == 1 && i > 0:
				p := in.Busy[i-1]
				s.At, s.Period = p.At.Add(p.Period), p.Period
			case len(a) == 3:
				at, err1 := a[0].Int64()
				period, err2 := a[1].Int64()
				if err := errors.Join(err1, err2); err != nil {
					return domain.UsageReport{}, fmt.Errorf("instance %s sample %d: %w", ki.ID, i, err)
				}
				s.At, s.Period = time.Unix(0, at).UTC(), time.Duration(period)
			default:
				return domain.UsageReport{}, fmt.Errorf("instance %s sample %d: %d values", ki.ID, i, len(a))
			}
			share, err := a[len(a)-1].Float64()
			if err != nil {
				return domain.UsageReport{}, fmt.Errorf("instance %s sample %d: %w", ki.ID, i, err)
			}
			s.Share = share
			in.Busy[i] = s
		}
		rep.Instances = append(rep.Instances, in)
	}
	return rep, nil
}

// SaveUsage keeps rep as row rowID's report at at, unless a later one is kept.
func (s *Store) SaveUsage(ctx context.Context, rowID string, rep domain.UsageReport, at time.Time) error {
	if s.readOnly {
		return fmt.Errorf("keep the usage of %s: %w", rowID, ErrReadOnly)
	}
	b, err := encodeUsage(rep)
	if err != nil {
		return fmt.Errorf("keep the usage of %s: %w", rowID, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO usage_kept (row_id, read_at, report) VALUES (?, ?, ?)
		ON CONFLICT(row_id) DO UPDATE SET read_at = excluded.read_at, report = excluded.report
		WHERE excluded.read_at >= usage_kept.read_at`, rowID, fmtTime(at), string(b))
	if err != nil {
		return fmt.Errorf("keep the usage of %s: %w", rowID, err)
	}
	return nil
}

// LoadUsage returns row rowID's kept report and when it was read; false when none.
func (s *Store) LoadUsage(ctx context.Context, rowID string) (domain.UsageReport, time.Time, bool, error) {
	if s.version < 3 {
		return domain.UsageReport{}, time.Time{}, false, nil
	}
	var at, body string
	err := s.db.QueryRowContext(ctx, `SELECT read_at, report FROM usage_kept WHERE row_id = ?`, rowID).Scan(&at, &body)
	if errors.Is(err, errNoRows) {
		return domain.UsageReport{}, time.Time{}, false, nil
	}
	if err != nil {
		return domain.UsageReport{}, time.Time{}, false, fmt.Errorf("read the usage kept of %s: %w", rowID, err)
	}
	t, err := parseTime(at)
	if err != nil {
		return domain.UsageReport{}, time.Time{}, false, fmt.Errorf("read the usage kept of %s: %w", rowID, err)
	}
	var rep domain.UsageReport
	if len(body) > maxKeptBytes {
		rep, err = decodeUsageMerged(body)
	} else {
		rep, err = decodeUsage([]byte(body))
	}
	if errors.Is(err, errKeptVersion) {
		return domain.UsageReport{}, time.Time{}, false, nil
	}
	if err != nil {
		return domain.UsageReport{}, time.Time{}, false, fmt.Errorf("read the usage kept of %s: %w", rowID, err)
	}
	return rep, t, true, nil
}
