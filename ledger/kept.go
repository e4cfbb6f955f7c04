package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/gpumarket/gpumarket/domain"
)

// Kept keeps what each row's provider last showed of its usage: the clouds forget.
type Kept interface {
	// LoadUsage returns the kept report and when it was read; false when none.
	LoadUsage(ctx context.Context, rowID string) (domain.UsageReport, time.Time, bool, error)
	SaveUsage(ctx context.Context, rowID string, rep domain.UsageReport, at time.Time) error
}

// readOnly is a Kept that saves nothing (a read-only store).
type readOnly interface{ ReadOnly() bool }

// runKey tells one run of an instance from another: a VM may run several times under one id.
type runKey struct {
	id    string
	start int64
}

func keyOf(in domain.InstanceUsage) runKey { return runKey{in.ID, in.Start.UnixNano()} }

// merge is the kept report and a newer read together (docs/DESIGN.md, "What the clouds forget is kept").
func merge(kept domain.UsageReport, keptAt time.Time, newer domain.UsageReport) domain.UsageReport {
	out := domain.UsageReport{Source: newer.Source, Note: withCapNote(newer.Note, capNoteOf(kept.Note)),
		InterruptionsUnknown: newer.InterruptionsUnknown}
	keptRuns := map[runKey]domain.InstanceUsage{}
	for _, in := range kept.Instances {
		keptRuns[keyOf(in)] = in
	}
	listed := map[runKey]bool{}
	newerRuns := map[string][]domain.InstanceUsage{}
	newerSamples := false
	for _, in := range newer.Instances {
		k := keyOf(in)
		listed[k] = true
		newerRuns[in.ID] = append(newerRuns[in.ID], in)
		newerSamples = newerSamples || len(in.Busy) > 0
		if old, ok := keptRuns[k]; ok {
			in.Busy = unionSamples(old.Busy, in.Busy)
		}
		in.EndLastSeen = false
		out.Instances = append(out.Instances, in)
	}
	keptSamples := false
	for _, in := range kept.Instances {
		if listed[keyOf(in)] {
			continue
		}
		if in.End.IsZero() {
			in.End, in.EndLastSeen = keptAt, true
		}
		for _, piece := range uncovered(in, newerRuns[in.ID]) {
			if listed[keyOf(piece)] {
				// Overlapping kept runs cut to the same piece: nothing counts twice.
				continue
			}
			listed[keyOf(piece)] = true
			keptSamples = keptSamples || len(piece.Busy) > 0
			out.Instances = append(out.Instances, piece)
		}
	}
	if out.Source == "" && !newerSamples && keptSamples {
		out.Source = kept.Source
	} else if kept.Source != "" && out.Source != "" && kept.Source != out.Source && keptSamples {
		out.Source += "; earlier samples: " + kept.Source
	}
	slices.SortStableFunc(out.Instances, func(a, b domain.InstanceUsage) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), a.Start.Compare(b.Start))
	})
	return out
}

// unionSamples are both sets by start, oldest first, b's where both have one.
func unionSamples(a, b []domain.BusySample) []domain.BusySample {
	if len(a) == 0 {
		return b
	}
	byAt := make(map[int64]domain.BusySample, len(a)+len(b))
	for _, s := range a {
		byAt[s.At.UnixNano()] = s
	}
	for _, s := range b {
		byAt[s.At.UnixNano()] = s
	}
	return slices.SortedFunc(maps.Values(byAt), func(a, b domain.BusySample) int { return a.At.Compare(b.At) })
}

// uncovered is run in cut to the time no newer run of its instance covers.
func uncovered(in domain.InstanceUsage, newer []domain.InstanceUsage) []domain.InstanceUsage {
	type span struct{ from, to time.Time }
	pieces := []span{{in.Start, in.End}}
	for _, n := range newer {
		var next []span
		for _, p := range pieces {
			nEnd := n.End
			if nEnd.IsZero() || nEnd.After(p.to) {
				nEnd = p.to
			}
			if !n.Start.Before(p.to) || !nEnd.After(p.from) {
				next = append(next, p) // no overlap
				continue
			}
			if n.Start.After(p.from) {
				next = append(next, span{p.from, n.Start})
			}
			if nEnd.Before(p.to) {
				next = append(next, span{nEnd, p.to})
			}
		}
		pieces = next
	}
	var out []domain.InstanceUsage
	for _, p := range pieces {
		if !p.to.After(p.from) {
			continue
		}
		c := in
		c.Start, c.End, c.Busy = p.from, p.to, nil
		if !p.to.Equal(in.End) {
			c.Interrupted, c.EndLastSeen = false, false
		}
		for _, s := range in.Busy {
			if s.At.Before(p.to) && s.At.Add(s.Period).After(p.from) {
				c.Busy = append(c.Busy, s)
			}
		}
		out = append(out, c)
	}
	return out
}

// bound keeps the runs and samples of rep that overlap [start, end).
func bound(rep domain.UsageReport, start, end time.Time) domain.UsageReport {
	out := rep
	out.Instances = nil
	overlaps := func(from, to time.Time) bool {
		return (to.IsZero() || to.After(start)) && (end.IsZero() || from.Before(end))
	}
	for _, in := range rep.Instances {
		if !overlaps(in.Start, in.End) {
			continue
		}
		busy := in.Busy
		in.Busy = nil
		for _, s := range busy {
			if overlaps(s.At, s.At.Add(s.Period)) {
				in.Busy = append(in.Busy, s)
			}
		}
		out.Instances = append(out.Instances, in)
	}
	return out
}

// closeOpen ends at at the runs still running when rep was read.
func closeOpen(rep domain.UsageReport, at time.Time) domain.UsageReport {
	out := rep
	out.Instances = append([]domain.InstanceUsage(nil), rep.Instances...)
	for i := range out.Instances {
		if out.Instances[i].End.IsZero() {
			out.Instances[i].End = at
		}
	}
	return out
}

// lastSeenNote says how many instances count only until last seen, or "".
func lastSeenNote(rep domain.UsageReport, start, end time.Time) string {
	n := 0
	var first, last time.Time
	for _, in := range rep.Instances {
		if !in.EndLastSeen || !in.End.Before(end) || !in.End.After(start) {
			continue
		}
		n++
		if first.IsZero() || in.End.Before(first) {
			first = in.End
		}
		if in.End.After(last) {
			last = in.End
		}
	}
	if n == 0 {
		return ""
	}
	what := "1 instance no longer listed by the cloud: counted until last seen"
	may := "it may have run a little longer"
	if n > 1 {
		what = fmt.Sprintf("%d instances no longer listed by the cloud: counted until last seen", n)
		may = "they may have run a little longer"
	}
	when := "at " + utcMinute(last)
	if !first.Equal(last) {
		when = fmt.Sprintf("between %s and %s", utcMinute(first), utcMinute(last))
	}
	return fmt.Sprintf("%s %s (%s)", what, when, may)
}

// utcMinute is a time as the notes say it: "2026-03-05 14:55 UTC".
func utcMinute(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") + " UTC" }

// keptNote says when kept figures were read and why they stand.
func keptNote(at time.Time, why string) string {
	return fmt.Sprintf("figures as last read at %s, kept in the ledger (%s)", utcMinute(at), strings.TrimSpace(why))
}

// maxKeptSamples caps the busy samples kept per row (some 1 MB of report).
const maxKeptSamples = 100_000

// keptCapSays starts a capped report's note; later reads find it by it.
const keptCapSays = "the usage kept in the ledger is capped at "

const dropSays = "those before "

// maxMergeRounds bounds the merging; each round halves the oldest half.
const maxMergeRounds = 12

// capKept bounds rep to max samples, merging the oldest, then dropping; it says what it did.
func capKept(rep domain.UsageReport, max int) (domain.UsageReport, string) {
	total := countSamples(rep)
	if total <= max {
		return rep, ""
	}
	out := rep
	out.Instances = slices.Clone(rep.Instances)
	var mergedBefore time.Time
	for round := 0; total > max && round < maxMergeRounds; round++ {
		ats := sampleStarts(out)
		cut := time.Unix(0, ats[len(ats)/2]).UTC() // the start of the median sample
		merged := 0
		for i := range out.Instances {
			var n int
			out.Instances[i].Busy, n = mergePairs(out.Instances[i].Busy, cut)
			merged += n
		}
		if merged == 0 {
			break // nothing neighbouring left to merge
		}
		total -= merged
		if cut.After(mergedBefore) {
			mergedBefore = cut
		}
	}
	var droppedBefore time.Time
	if total > max {
		droppedBefore = dropOldest(&out, total-max)
	}
	var says []string
	if !mergedBefore.IsZero() {
		says = append(says, "samples before "+utcMinute(mergedBefore)+" merged into longer ones")
	}
	if !droppedBefore.IsZero() {
		says = append(says, dropSays+utcMinute(droppedBefore)+" dropped (that time is unmeasured)")
	}
	return out, fmt.Sprintf("%s%d samples: %s", keptCapSays, max, strings.Join(says, "; "))
}

func countSamples(rep domain.UsageReport) int {
	n := 0
	for _, in := range rep.Instances {
		n += len(in.Busy)
	}
	return n
}

// sampleStarts are the starts of rep's samples in Unix nanoseconds, in order.
func sampleStarts(rep domain.UsageReport) []int64 {
	ats := make([]int64, 0, countSamples(rep))
	for _, in := range rep.Instances {
		for _, s := range in.Busy {
			ats = append(ats, s.At.UnixNano())
		}
	}
	slices.Sort(ats)
	return ats
}

// mergePairs merges neighbouring equal samples ending by cut, two into one.
func mergePairs(busy []domain.BusySample, cut time.Time) ([]domain.BusySample, int) {
	m := sampleMerger{factor: 2, cut: cut}
	for _, s := range busy {
		m.add(s)
	}
	out := m.done()
	return out, len(busy) - len(out)
}

// dropOldest drops rep's n oldest samples and returns the oldest start kept.
func dropOldest(rep *domain.UsageReport, n int) time.Time {
	ats := sampleStarts(*rep)
	if n >= len(ats) {
		for i := range rep.Instances {
			rep.Instances[i].Busy = nil
		}
		return time.Unix(0, ats[len(ats)-1]).Add(time.Nanosecond).UTC()
	}
	keep := ats[n]
	atKeep := n - slices.Index(ats, keep)
	for i := range rep.Instances {
		busy := rep.Instances[i].Busy
		out := busy[:0:0]
		for _, s := range busy {
			at := s.At.UnixNano()
			if at < keep {
				continue
			}
			if at == keep && atKeep > 0 {
				atKeep--
				continue
			}
			out = append(out, s)
		}
		rep.Instances[i].Busy = out
	}
	return time.Unix(0, keep).UTC()
}

// capNoteOf is the cap's sentence in a kept report's note, "" if none.
func capNoteOf(note string) string {
	for _, part := range strings.Split(note, "; ") {
		if strings.HasPrefix(part, keptCapSays) {
			// The sentence runs to the end: its parts join with "; ".
			return note[strings.Index(note, part):]
		}
	}
	return ""
}

// withCapNote puts the cap's sentence last in note, replacing an earlier one.
func withCapNote(note, capped string) string {
	if capped == "" {
		return note
	}
	old := capNoteOf(note)
	if old != "" {
		note = strings.TrimSuffix(strings.TrimSuffix(note, old), "; ")
	}
	if i := strings.Index(old, dropSays); i >= 0 && !strings.Contains(capped, dropSays) {
		capped += "; " + old[i:] // what was dropped stays dropped
	}
	if note == "" {
		return capped
	}
	return note + "; " + capped
}

// capForKeeping is rep within the cap, its note saying so.
func capForKeeping(rep domain.UsageReport) domain.UsageReport {
	out, says := capKept(rep, maxKeptSamples)
	if says != "" {
		out.Note = withCapNote(out.Note, says)
	}
	return out
}

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
	var t time.Time
	var rep domain.UsageReport
	err := s.db.QueryRowContext(ctx, `SELECT read_at, report FROM usage_kept WHERE row_id = ?`, rowID).Scan(&at, &body)
	if err == nil {
		t, err = parseTime(at)
	}
	if err == nil {
		rep, err = decodeUsage(body)
	}
	switch {
	case errors.Is(err, errNoRows) || errors.Is(err, errKeptVersion):
		return domain.UsageReport{}, time.Time{}, false, nil
	case err != nil:
		return domain.UsageReport{}, time.Time{}, false, fmt.Errorf("read the usage kept of %s: %w", rowID, err)
	}
	return rep, t, true, nil
}

// maxKeptBytes: a larger (pre-cap) kept report is merged as it streams.
var maxKeptBytes = 16 << 20

// bytesPerSample is the least a kept sample takes ("[0.5],").
const bytesPerSample = 6

// decodeUsage reads what encodeUsage wrote as it streams; an oversized report
// (over maxKeptBytes) is read merging samples as it goes, then capped.
func decodeUsage(body string) (domain.UsageReport, error) {
	factor := 1
	if len(body) > maxKeptBytes {
		factor = max(1, (len(body)/bytesPerSample+maxKeptSamples-1)/maxKeptSamples)
	}
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
	if factor == 1 {
		return rep, nil
	}
	rep, says := capKept(rep, maxKeptSamples)
	read := fmt.Sprintf("an oversized report read with up to %d neighbouring samples merged into one", factor)
	if says == "" {
		says = fmt.Sprintf("%s%d samples: %s", keptCapSays, maxKeptSamples, read)
	} else {
		says += "; " + read
	}
	rep.Note = withCapNote(rep.Note, says)
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

// sampleMerger merges up to factor neighbouring samples into one, those ending by cut when it is set.
type sampleMerger struct {
	factor int
	cut    time.Time
	out    []domain.BusySample
	cur    domain.BusySample
	n      int
}

func (m *sampleMerger) add(s domain.BusySample) {
	if m.n > 0 && m.n < m.factor && s.Period == m.cur.Period/time.Duration(m.n) && s.At.Equal(m.cur.At.Add(m.cur.Period)) &&
		(m.cut.IsZero() || !s.At.Add(s.Period).After(m.cut)) {
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

// FleetUsages is every fleet row's kept usage, where it ran: what plans learn
// the user's own interruptions from. A row with nothing kept is left out.
func (s *Store) FleetUsages(ctx context.Context) ([]domain.FleetUsage, error) {
	rows, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	return fleetUsages(rows, func(id string) (domain.UsageReport, bool) {
		rep, _, ok, err := s.LoadUsage(ctx, id)
		return rep, ok && err == nil
	}), nil
}

func fleetUsages(rows []Entry, load func(id string) (domain.UsageReport, bool)) []domain.FleetUsage {
	var fs []domain.FleetUsage
	for _, r := range rows {
		if r.Kind != domain.KindFleet {
			continue
		}
		if rep, ok := load(r.ID); ok {
			fs = append(fs, domain.FleetUsage{Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Report: rep})
		}
	}
	return fs
}
