package aws

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// recorded reads an answer of testdata/ec2 (see its README).
func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ec2", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recordedNow is the clock of the recorded answers: the day before the
// 2025-02-14 blocks of the documented example.
var recordedNow = time.Date(2025, 2, 13, 12, 0, 0, 0, time.UTC)

// logBuffer collects a provider's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// recordedProvider serves a recorded DescribeCapacityBlockOfferings answer
// for us-east-2, at the recorded answers' clock.
func recordedProvider(t *testing.T, answer string, logs *logBuffer) (*fixture, *Provider) {
	t.Helper()
	f := newFixture(t, "us-east-2")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeCapacityBlockOfferings", Body: recorded(t, answer)})
	p := f.provider(t, func(o *Options) {
		o.Now = func() time.Time { return recordedNow }
		if logs != nil {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	})
	return f, p
}

func ids(offers []domain.Offering) []string {
	var out []string
	for _, o := range offers {
		out = append(out, o.ID)
	}
	return out
}

// AWS answers a 24 h search with 19 h and 43 h blocks too, and
// they were listed (and ranked) with the 24 h one.
func TestFindOfferingsKeepsOnlyTheAskedLengthAndStart(t *testing.T) {
	const (
		exact = "cb-0bfad2f7fb1b4478a" // 24 h from 02-15 11:30, $283
		short = "cb-0cfb51b701f835f96" // 19 h 17 min from 02-14 16:13, $228
		long  = "cb-0c1fa9b2125eb49e0" // 43 h 17 min from 02-14 16:13, $511
	)
	base := domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"us-east-2"}, Kinds: []string{domain.KindBlock}}
	for name, tc := range map[string]struct {
		mod  func(*domain.OfferingQuery)
		want []string
	}{
		"exact length only": {func(*domain.OfferingQuery) {}, []string{exact}},
		// The asked length first, then the others cheapest per GPU-hour:
		// 511/(8×43.28) < 228/(8×19.28).
		"flex 20h":                              {func(q *domain.OfferingQuery) { q.FlexDuration = 20 * time.Hour }, []string{exact, long, short}},
		"flex 5h":                               {func(q *domain.OfferingQuery) { q.FlexDuration = 5 * time.Hour }, []string{exact, short}},
		"flex 4h42m, short of the 19h17m block": {func(q *domain.OfferingQuery) { q.FlexDuration = 4*time.Hour + 42*time.Minute }, []string{exact}},
		"start after the 16:13 blocks": {func(q *domain.OfferingQuery) {
			q.FlexDuration = 20 * time.Hour
			q.StartAfter = time.Date(2025, 2, 14, 17, 0, 0, 0, time.UTC)
		}, []string{exact}},
		"start before the 11:30 block": {func(q *domain.OfferingQuery) {
			q.FlexDuration = 20 * time.Hour
			q.StartBefore = time.Date(2025, 2, 15, 0, 0, 0, 0, time.UTC)
		}, []string{long, short}},
		"start range of the 11:30 block alone": {func(q *domain.OfferingQuery) {
			q.StartAfter = time.Date(2025, 2, 15, 11, 30, 0, 0, time.UTC)
			q.StartBefore = time.Date(2025, 2, 15, 11, 30, 0, 0, time.UTC).Add(time.Minute)
		}, []string{exact}},
		"another count": {func(q *domain.OfferingQuery) { q.Instances = 2 }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			_, p := recordedProvider(t, "describe-capacity-block-offerings-24h.xml", nil)
			q := base
			tc.mod(&q)
			offers, err := p.FindOfferings(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(offers); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("offerings %v, want %v", got, tc.want)
			}
			for _, o := range offers {
				if flex := o.End.Sub(o.Start) != 24*time.Hour; o.FlexLength != flex {
					t.Errorf("%s lasts %s: FlexLength %v, want %v", o.ID, o.End.Sub(o.Start), o.FlexLength, flex)
				}
				if o.Start.Before(q.StartAfter) || (!q.StartBefore.IsZero() && o.Start.After(q.StartBefore)) {
					t.Errorf("%s starts %s, outside the asked range", o.ID, o.Start)
				}
			}
		})
	}
}

// The fake answers as AWS does (other lengths and starts beside the asked
// one, paged); FindOfferings keeps the asked length only, page after page.
func TestFindOfferingsDropsTheOtherLengthsOfEveryPage(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.MaxPage = 1
	f.fake.AddFault(ec2test.Throttle("DescribeCapacityBlockOfferings", "", 1))
	p := f.provider(t, nil)
	q := domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"us-east-1"}}
	offers, err := p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var exact, others int
	for _, o := range f.fake.Region("us-east-1").Offerings {
		if o.InstanceType != "p5.48xlarge" {
			continue
		}
		switch l := o.Length(); {
		case l == 24*time.Hour:
			exact++
		case l > 0 && l < 48*time.Hour:
			others++
		}
	}
	if exact == 0 || others == 0 {
		t.Fatalf("the fake offers %d blocks of 24 h and %d of other lengths near it: nothing to check", exact, others)
	}
	if len(offers) != exact {
		t.Fatalf("%d offerings, want the %d of 24 h: %+v", len(offers), exact, offers)
	}
	for _, o := range offers {
		if o.End.Sub(o.Start) != 24*time.Hour || o.FlexLength {
			t.Errorf("%s lasts %s (flex %v)", o.ID, o.End.Sub(o.Start), o.FlexLength)
		}
	}
	var pages, tokens int
	for _, c := range f.fake.Calls() {
		if c.Action == "DescribeCapacityBlockOfferings" && !c.Faulted {
			pages++
			if c.Params.Get("NextToken") != "" {
				tokens++
			}
		}
	}
	if pages < exact+others || tokens == 0 {
		t.Errorf("%d pages (%d with a NextToken) for %d offerings: the answer was not paged through", pages, tokens, exact+others)
	}
	// With a flexible length, the others within it come after, marked.
	q.FlexDuration = 23 * time.Hour
	offers, err = p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) != exact+others {
		t.Fatalf("flex: %d offerings, want %d", len(offers), exact+others)
	}
	for i, o := range offers {
		if o.FlexLength != (i >= exact) {
			t.Errorf("flex: offering %d (%s, %s) FlexLength %v", i, o.ID, o.End.Sub(o.Start), o.FlexLength)
		}
	}
}

// One offering with a NaN, infinite, negative or unparsable
// fee failed the whole search.
func TestFindOfferingsSkipsOfferingsWithoutAFee(t *testing.T) {
	var logs logBuffer
	_, p := recordedProvider(t, "describe-capacity-block-offerings-bad-fees.xml", &logs)
	offers, err := p.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"us-east-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(offers); strings.Join(got, ",") != "cb-0bfad2f7fb1b4478a,cb-0ee1f2a3b4c5d6e7f" {
		t.Fatalf("offerings %v, want the two with a fee", got)
	}
	// The second leaves out every optional member but its hours.
	o := offers[1]
	if o.UpfrontUSD != 290.5 || o.InstanceCount != 1 || o.Currency != "USD" || o.Zone != "" ||
		!o.End.Equal(time.Date(2025, 2, 22, 11, 30, 0, 0, time.UTC)) {
		t.Errorf("offering without optional members: %+v", o)
	}
	warned := logs.lines("capacity block offering skipped")
	if len(warned) != 5 {
		t.Fatalf("%d warnings, want one per bad offering:\n%s", len(warned), strings.Join(warned, "\n"))
	}
	for _, id := range []string{"cb-0000000000000nan", "cb-0000000000000inf", "cb-0000000000000neg", "cb-0000000000000txt", "cb-00000000000nofee"} {
		n := 0
		for _, w := range warned {
			if strings.Contains(w, id) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings name %s, want 1", n, id)
		}
	}
}

// Real reservation states read as the ledger's "unknown".
func TestReservationStatesMeanWhatTheySay(t *testing.T) {
	start, end := testNow.Add(24*time.Hour), testNow.Add(48*time.Hour)
	want := map[ec2types.CapacityReservationState]string{
		"active": "active", "expired": "ended", "cancelled": "deleted", "cancelling": "deleted",
		"pending": "scheduled", "scheduled": "scheduled", "assessing": "scheduled", "delayed": "scheduled",
		"payment-pending": "scheduled", "unavailable": "scheduled",
		"failed": "failed", "payment-failed": "failed", "unsupported": "failed",
	}
	for _, s := range ec2types.CapacityReservationState("").Values() {
		w, ok := want[s]
		if !ok {
			t.Errorf("state %q of the API has no ledger state decided in this test", s)
			continue
		}
		got, _ := reservationState(s, start, end, testNow)
		if got != w {
			t.Errorf("%s → %s, want %s", s, got, w)
		}
	}
	// States that wait for the window follow it.
	for _, s := range []ec2types.CapacityReservationState{"payment-pending", "unavailable", "delayed", "something-new"} {
		if got, _ := reservationState(s, start, end, start.Add(time.Hour)); got != "active" {
			t.Errorf("%s within its window → %s, want active", s, got)
		}
		if got, _ := reservationState(s, start, end, end); got != "ended" {
			t.Errorf("%s after its window → %s, want ended", s, got)
		}
	}
	if got, note := reservationState("something-new", start, end, testNow); got != "scheduled" || !strings.Contains(note, "something-new") {
		t.Errorf("an unknown state → %s (%q), want scheduled with the state named", got, note)
	}

	// Through the endpoint: each state as DescribeCapacityReservations
	// shows it, read by ListRecords and FindBooking.
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	byID := map[string]string{}
	for _, s := range []string{"payment-pending", "payment-failed", "cancelling", "unavailable", "cancelled", "failed", "delayed", "assessing", "unsupported", "pending"} {
		id := "cr-" + strings.ReplaceAll(s, "-", "")
		f.fake.AddReservation(ec2test.Reservation{ID: id, Region: "us-east-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a",
			Count: 1, Start: start, End: end, Created: testNow, State: s,
			Tags: domain.Tags("L-"+s, "alice@host", "cb-"+s)})
		byID[id] = string(want[ec2types.CapacityReservationState(s)])
	}
	f.fake.PaymentDelay = time.Hour // payment-pending stays so
	recs, err := p.ListRecords(context.Background(), testNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(byID) {
		t.Fatalf("%d records, want %d", len(recs), len(byID))
	}
	for _, r := range recs {
		if r.State != byID[r.ProviderRef] {
			t.Errorf("%s: ledger state %q, want %q", r.ProviderRef, r.State, byID[r.ProviderRef])
		}
	}
	o := domain.Offering{ID: "cb-payment-failed", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge", InstanceCount: 1, Start: start, End: end}
	b, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L-payment-failed"})
	if err != nil || b == nil || b.State != "failed" || !strings.Contains(b.Message, "payment") {
		t.Errorf("FindBooking of a payment-failed block: %+v, %v; want failed, saying why", b, err)
	}
}

// A block before its start shows TotalInstanceCount 0 at AWS; the count
// bought is in AWS's own tag. FindBooking compared the 0 and never found
// a scheduled block.
func TestFindBookingReadsTheCountOfABlockNotYetStarted(t *testing.T) {
	f := newFixture(t, "us-east-2")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeCapacityReservations", Body: recorded(t, "describe-capacity-reservations-capacity-block.xml")})
	p := f.provider(t, func(o *Options) { o.Now = func() time.Time { return recordedNow.Add(time.Hour) } })
	o := domain.Offering{ID: "cb-0bfad2f7fb1b4478a", Region: "us-east-2", Zone: "us-east-2a", InstanceType: "p4d.24xlarge",
		Start: time.Date(2025, 2, 15, 11, 30, 0, 0, time.UTC), End: time.Date(2025, 2, 16, 11, 30, 0, 0, time.UTC)}
	for name, tc := range map[string]struct {
		count int
		ref   string
		want  string
	}{
		"its own block of 4":                  {4, "01JKXD7Q3M5V0R2T4W6Y8Z9ABC", "cr-0e0a8b6c5d4e3f201"},
		"another row's: the untagged 2":       {2, "01JKXD7Q3M5V0R2T4W6Y8Z9XYZ", "cr-0f1e2d3c4b5a69788"},
		"another row's block of 4 is not its": {4, "01JKXD7Q3M5V0R2T4W6Y8Z9XYZ", ""},
		"no block of 3":                       {3, "01JKXD7Q3M5V0R2T4W6Y8Z9ABC", ""},
	} {
		t.Run(name, func(t *testing.T) {
			o := o
			o.InstanceCount = tc.count
			b, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, After: recordedNow, Ref: tc.ref})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && b != nil:
				t.Errorf("found %s, want none", b.ProviderRef)
			case tc.want != "" && (b == nil || b.ProviderRef != tc.want || b.InstanceCount != tc.count || b.State != "scheduled"):
				t.Errorf("found %+v, want %s of %d instances, scheduled", b, tc.want, tc.count)
			}
		})
	}
}

// A lookup preferring an untagged look-alike over its own tagged
// block, or ignoring the instance count, survived every test.
func TestFindBookingPrefersItsOwnTaggedBlock(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	req := domain.BookRequest{Offering: o, After: testNow, Ref: "L1", Actor: "alice@host"}
	mine, err := p.Book(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	look := ec2test.Reservation{Region: o.Region, InstanceType: o.InstanceType, Zone: o.Zone, Count: o.InstanceCount,
		Start: o.Start, End: o.End, State: "scheduled"}
	later := look
	later.ID, later.Created = "cr-untaggedlater", testNow.Add(time.Minute) // newer than mine
	bigger := look
	bigger.ID, bigger.Created, bigger.Count = "cr-biggerlater", testNow.Add(2*time.Minute), o.InstanceCount+1
	other := look
	other.ID, other.Created, other.Tags = "cr-otheroffering", testNow.Add(3*time.Minute), map[string]string{domain.TagOffering: "cb-another"}
	for _, r := range []ec2test.Reservation{later, bigger, other} {
		f.fake.AddReservation(r)
	}
	got, err := p.FindBooking(context.Background(), req)
	if err != nil || got == nil || got.ProviderRef != mine.ProviderRef {
		t.Fatalf("FindBooking: %+v, %v; want its own tagged %s", got, err, mine.ProviderRef)
	}
	// Another intent cannot claim the tagged block; the untagged look-alike
	// of the same count is all there is for it.
	req.Ref = "L2"
	got, err = p.FindBooking(context.Background(), req)
	if err != nil || got == nil || got.ProviderRef != "cr-untaggedlater" {
		t.Errorf("FindBooking for another row: %+v, %v; want the untagged look-alike of the same count", got, err)
	}
}

func TestBookTagsThePurchase(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L5", Actor: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	res := f.fake.Reservations()
	if len(res) != 1 {
		t.Fatalf("%d reservations", len(res))
	}
	want := domain.Tags("L5", "alice@host", o.ID)
	want[TagCost] = strconv.FormatFloat(o.UpfrontUSD, 'f', 2, 64)
	if len(res[0].Tags) != len(want) {
		t.Errorf("tags %v, want %v", res[0].Tags, want)
	}
	for k, v := range want {
		if res[0].Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, res[0].Tags[k], v)
		}
	}
	for _, c := range f.fake.Calls() {
		if c.Action == "PurchaseCapacityBlock" && c.Params.Get("TagSpecification.1.ResourceType") != "capacity-reservation" {
			t.Errorf("tags sent for %q", c.Params.Get("TagSpecification.1.ResourceType"))
		}
	}
}

// Before buying, a reservation already bought from the same
// offering (a lost ledger, another process) is looked for by its tag.
func TestBookAnswersWithAnEarlierPurchaseOfTheOffering(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	earlier := ec2test.Reservation{ID: "cr-0earlier", Region: o.Region, InstanceType: o.InstanceType, Zone: o.Zone, Count: o.InstanceCount,
		Start: o.Start, End: o.End, Created: testNow.Add(-time.Hour), State: "payment-failed", Tags: domain.Tags("OLD", "bob@host", o.ID)}
	f.fake.AddReservation(earlier)
	// A failed earlier purchase holds nothing: the dry run asks AWS.
	dry, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "NEW", DryRun: true})
	if err != nil || !strings.Contains(dry.Message, "would succeed") {
		t.Fatalf("dry run over a failed earlier purchase: %+v, %v", dry, err)
	}
	f.fake.SetReservationState("cr-0earlier", "scheduled")
	dry, err = p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "NEW", DryRun: true})
	if err != nil || !dry.DryRun || dry.ProviderRef != "cr-0earlier" || !strings.Contains(dry.Message, "OLD") {
		t.Fatalf("dry run over an earlier purchase: %+v, %v", dry, err)
	}
	b, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "NEW"})
	if err != nil || b.ProviderRef != "cr-0earlier" || b.DryRun || b.State != "scheduled" || !strings.Contains(b.Message, "not bought again") {
		t.Fatalf("Book over an earlier purchase: %+v, %v", b, err)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
		t.Errorf("%d PurchaseCapacityBlock calls, want only the first dry run", n)
	}
}

func TestBookBuysNothingWhenTheLookUpFails(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	f.fake.AddFault(ec2test.Fault{Action: "DescribeCapacityReservations", Status: 500, Code: "InternalError", Message: "x"})
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L1"})
	if err == nil || !errors.Is(err, domain.ErrDeclined) || !strings.Contains(err.Error(), "nothing was bought") {
		t.Fatalf("Book with a failing look-up: %v; want a declined error saying nothing was bought", err)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 0 {
		t.Errorf("%d PurchaseCapacityBlock calls, want none", n)
	}
}

// Book bought at cached terms; RefreshOffering gives the
// terms AWS sells the same id at now, or ErrOfferingGone.
func TestRefreshOffering(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	same, err := p.RefreshOffering(context.Background(), o)
	if err != nil || same.ID != o.ID || same.UpfrontUSD != o.UpfrontUSD || !same.Start.Equal(o.Start) || !same.End.Equal(o.End) {
		t.Fatalf("refresh of an unchanged offering: %+v, %v; want %+v", same, err, o)
	}
	f.fake.Edit(func() {
		rd := f.fake.Region(o.Region)
		for i := range rd.Offerings {
			if rd.Offerings[i].ID == o.ID {
				rd.Offerings[i].UpfrontUSDPerInstance *= 3
			}
		}
	})
	fresh, err := p.RefreshOffering(context.Background(), o)
	if err != nil || fresh.ID != o.ID || fresh.UpfrontUSD != 3*o.UpfrontUSD {
		t.Fatalf("refresh of a repriced offering: %+v, %v; want $%v", fresh, err, 3*o.UpfrontUSD)
	}
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: fresh, After: testNow, Ref: "L1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RefreshOffering(context.Background(), o); !errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("refresh of a sold offering: %v, want ErrOfferingGone", err)
	}
	// A block of another length (kept with a flexible search) is found
	// again by a search of the nearest length AWS sells.
	q := domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour, FlexDuration: 23 * time.Hour, Regions: []string{"us-east-1"}}
	offers, err := p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var flex *domain.Offering
	for i := range offers {
		if offers[i].FlexLength {
			flex = &offers[i]
			break
		}
	}
	if flex == nil {
		t.Fatal("no offering of another length to refresh")
	}
	if got, err := p.RefreshOffering(context.Background(), *flex); err != nil || got.ID != flex.ID || !got.End.Equal(flex.End) || !got.FlexLength {
		t.Errorf("refresh of a %s block: %+v, %v", flex.End.Sub(flex.Start), got, err)
	}
	// Withdrawn by AWS.
	f.fake.Edit(func() {
		rd := f.fake.Region(flex.Region)
		kept := rd.Offerings[:0]
		for _, x := range rd.Offerings {
			if x.ID != flex.ID {
				kept = append(kept, x)
			}
		}
		rd.Offerings = kept
	})
	if _, err := p.RefreshOffering(context.Background(), *flex); !errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("refresh of a withdrawn offering: %v, want ErrOfferingGone", err)
	}
}

// offeringOf reads AWS's answer, not user input, but an answer can hold
// anything: it never panics, and an offering it accepts has a finite,
// non-negative fee and an end after its start.
func FuzzOfferingOf(f *testing.F) {
	f.Add("283", int32(24), int32(0), true)
	f.Add("NaN", int32(19), int32(17), false)
	f.Add("+Inf", int32(0), int32(0), false)
	f.Add("-1e308", int32(-5), int32(90), true)
	f.Add("", int32(2147483647), int32(2147483647), false)
	f.Fuzz(func(t *testing.T, fee string, hours, minutes int32, withEnd bool) {
		start := recordedNow
		o := ec2types.CapacityBlockOffering{CapacityBlockOfferingId: awssdk.String("cb-1"), StartDate: &start,
			UpfrontFee: &fee, CapacityBlockDurationHours: &hours, CapacityBlockDurationMinutes: &minutes}
		if withEnd {
			end := start.Add(time.Duration(hours) * time.Hour)
			o.EndDate = &end
		}
		got, err := offeringOf("us-east-1", GPUType{InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8}}, o, 1)
		if err != nil {
			return
		}
		if got.UpfrontUSD < 0 || math.IsNaN(got.UpfrontUSD) || math.IsInf(got.UpfrontUSD, 0) || !got.End.After(got.Start) {
			t.Fatalf("accepted %+v from fee %q, %dh%dm", got, fee, hours, minutes)
		}
	})
}

// TestFindOfferingsWarnsPerRegion: with one of
// two regions failing, FindOfferings dropped it silently, so `offerings`
// gave no warning for it. The answering region's offerings come back
// with an error that names the failed region (ledger.RegionErrors); the
// search then warns of it. With every region failing it is an error.
func TestFindOfferingsWarnsPerRegion(t *testing.T) {
	for name, fault := range map[string]ec2test.Fault{
		"500": {Action: "DescribeCapacityBlockOfferings", Region: "us-west-2", Status: 500, Code: "InternalError",
			Message: "An internal error has occurred."},
		"throttled": ec2test.Throttle("DescribeCapacityBlockOfferings", "us-west-2", 0),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.fake.AddFault(fault)
			p := f.provider(t, nil)
			offers, err := p.FindOfferings(context.Background(), h100Query())
			var re ledger.RegionErrors
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T): want one naming the failed region", err, err)
			}
			if got := re.RegionErrors(); len(got) != 1 || got["us-west-2"] == nil || !strings.Contains(got["us-west-2"].Error(), fault.Code) {
				t.Fatalf("region errors %v: want us-west-2's %s", got, fault.Code)
			}
			if len(offers) != 2 {
				t.Fatalf("%d offerings, want us-east-1's 2", len(offers))
			}
			for _, o := range offers {
				if o.Region != "us-east-1" {
					t.Errorf("offering %s of %s", o.ID, o.Region)
				}
			}
			// Every region failing is an error of its own, with no
			// offerings: the provider did not answer.
			f.fake.AddFault(ec2test.Fault{Action: "DescribeCapacityBlockOfferings", Region: "us-east-1", Status: 500, Code: "InternalError", Message: "An internal error has occurred."})
			offers, err = p.FindOfferings(context.Background(), h100Query())
			if err == nil || errors.As(err, &re) || len(offers) != 0 || !strings.Contains(err.Error(), "us-east-1") || !strings.Contains(err.Error(), "us-west-2") {
				t.Fatalf("every region failed: %d offerings, %v (%T)", len(offers), err, err)
			}
		})
	}
}
