package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
	var k struct {
		keptReport
		Instances []keptRun `json:"instances"`
	}
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
		if err := scanBusy(ki.Busy, func(s domain.BusySample) { in.Busy = append(in.Busy, s) }); err != nil {
			return domain.UsageReport{}, fmt.Errorf("instance %s: %w", ki.ID, err)
		}
		rep.Instances = append(rep.Instances, in)
	}
	return rep, nil
}

// keptRun is a keptInstance whose samples are read by scanBusy.
type keptRun struct {
	keptInstance
	Busy json.RawMessage `json:"busy,omitempty"`
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

// maxKeptBytes: a larger (pre-cap) kept report is merged as it streams.
var maxKeptBytes = 16 << 20

// bytesPerSample is the least a kept sample takes ("[0.5],").
const bytesPerSample = 6

// decodeUsageMerged reads an oversized report merging samples as it goes, then caps it.
func decodeUsageMerged(body string) (domain.UsageReport, error) {
	factor := max(1, (len(body)/bytesPerSample+maxKeptSamples-1)/maxKeptSamples)
	dec := json.NewDecoder(strings.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return domain.UsageReport{}, cmp.Or(err, fmt.Errorf("kept usage: %v where { was expected", tok))
	}
	var rep domain.UsageReport
	version := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return domain.UsageReport{}, err
		}
		var err2 error
		switch tok {
		case "v":
			err2 = dec.Decode(&version)
		case "source":
			err2 = dec.Decode(&rep.Source)
		case "note":
			err2 = dec.Decode(&rep.Note)
		case "interruptions_unknown":
			err2 = dec.Decode(&rep.InterruptionsUnknown)
		case "instances":
			rep.Instances, err2 = decodeInstancesMerged(dec, factor)
		default:
			err2 = dec.Decode(&json.RawMessage{})
		}
		if err2 != nil {
			return domain.UsageReport{}, err2
		}
	}
	if version != keptVersion {
		return domain.UsageReport{}, fmt.Errorf("%w (version %d)", errKeptVersion, version)
	}
	rep, says := capKept(rep, maxKeptSamples)
	if factor > 1 {
		read := fmt.Sprintf("an oversized report read with up to %d neighbouring samples merged into one", factor)
		if says == "" {
			says = fmt.Sprintf("%s%d samples: %s", keptCapSays, maxKeptSamples, read)
		} else {
			says += "; " + read
		}
	}
	if says != "" {
		rep.Note = withCapNote(rep.Note, says)
	}
	return rep, nil
}

// decodeInstancesMerged reads the instances array one at a time.
func decodeInstancesMerged(dec *json.Decoder, factor int) ([]domain.InstanceUsage, error) {
	if tok, err := dec.Token(); err != nil || tok == nil {
		return nil, err // null: none
	} else if tok != json.Delim('[') {
		return nil, fmt.Errorf("kept usage: instances is %v, not an array", tok)
	}
	var out []domain.InstanceUsage
	for dec.More() {
		var ki keptRun
		if err := dec.Decode(&ki); err != nil {
			return nil, err
		}
		in := ki.usage()
		m := sampleMerger{factor: factor}
		if err := scanBusy(ki.Busy, m.add); err != nil {
			return nil, fmt.Errorf("instance %s: %w", ki.ID, err)
		}
		in.Busy = m.done()
		out = append(out, in)
	}
	_, err := dec.Token() // ]
	return out, err
}

// sampleMerger merges up to factor neighbouring samples into one.
type sampleMerger struct {
	factor int
	out    []domain.BusySample
	cur    domain.BusySample
	n      int
}

func (m *sampleMerger) add(s domain.BusySample) {
	if m.n > 0 && m.n < m.factor && s.Period == m.cur.Period/time.Duration(m.n) && s.At.Equal(m.cur.At.Add(m.cur.Period)) {
		m.cur.Share = (m.cur.Share*float64(m.n) + s.Share) / float64(m.n+1)
		m.cur.Period += s.Period
		m.n++
		return
	}
	m.flush()
	m.cur, m.n = s, 1
}

func (m *sampleMerger) flush() {
	if m.n > 0 {
		m.out = append(m.out, m.cur)
	}
	m.n = 0
}

func (m *sampleMerger) done() []domain.BusySample {
	m.flush()
	return m.out
}

// scanBusy hands each sample of a kept busy array to emit without decoding it whole.
func scanBusy(raw []byte, emit func(domain.BusySample)) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	p := busyScanner{b: raw}
	if !p.eat('[') {
		return errors.New("busy is not an array")
	}
	var prev domain.BusySample
	for i := 0; ; i++ {
		if p.eat(']') {
			return nil
		}
		if i > 0 && !p.eat(',') {
			return fmt.Errorf("sample %d: no comma before it", i)
		}
		if !p.eat('[') {
			return fmt.Errorf("sample %d: not an array", i)
		}
		var vals [3]string
		n := 0
		for !p.eat(']') {
			if n > 0 && !p.eat(',') {
				return fmt.Errorf("sample %d: no comma", i)
			}
			v, ok := p.number()
			if !ok || n == len(vals) {
				return fmt.Errorf("sample %d: more than 3 values or not a number", i)
			}
			vals[n] = v
			n++
		}
		var s domain.BusySample
		switch {
		case n == 1 && i > 0:
			s.At, s.Period = prev.At.Add(prev.Period), prev.Period
		case n == 3:
			at, err1 := strconv.ParseInt(vals[0], 10, 64)
			period, err2 := strconv.ParseInt(vals[1], 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("sample %d: %w", i, err)
			}
			s.At, s.Period = time.Unix(0, at).UTC(), time.Duration(period)
		default:
			return fmt.Errorf("sample %d: %d values", i, n)
		}
		share, err := strconv.ParseFloat(vals[n-1], 64)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		s.Share = share
		emit(s)
		prev = s
	}
}

type busyScanner struct {
	b []byte
	i int
}

func (p *busyScanner) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\t' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *busyScanner) eat(c byte) bool {
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// number is the next JSON number's text.
func (p *busyScanner) number() (string, bool) {
	p.skipSpace()
	j := p.i
	for j < len(p.b) && strings.IndexByte("+-.0123456789eE", p.b[j]) >= 0 {
		j++
	}
	if j == p.i {
		return "", false
	}
	// No copy per sample: strconv copies what it keeps.
	s := unsafe.String(&p.b[p.i], j-p.i)
	p.i = j
	return s, true
}
