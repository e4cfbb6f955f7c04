package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// hungFinder is a provider whose search never answers: one that honours
// its context returns when it ends; one that does not, never.
type hungFinder struct {
	name     string
	honours  bool
	released chan struct{}
}

func (h hungFinder) Name() string                { return h.name }
func (h hungFinder) Describe() domain.Descriptor { return domain.Descriptor{Name: h.name} }
func (h hungFinder) Fetch(context.Context, domain.FetchRequest, domain.Sink) error {
	return nil
}
func (h hungFinder) FindOfferings(ctx context.Context, _ domain.OfferingQuery) ([]domain.Offering, error) {
	if h.honours {
		<-ctx.Done()
		return nil, fmt.Errorf("describe capacity block offerings in us-west-2: %w", ctx.Err())
	}
	<-h.released
	return nil, errors.New("too late")
}

// regionsFinder answers for one region and names the other's failure.
type regionsFinder struct{ *ledgertest.Fake }

type regionErrs map[string]error

func (r regionErrs) Error() string                  { return fmt.Sprintf("%d regions failed", len(r)) }
func (r regionErrs) RegionErrors() map[string]error { return r }

func (r regionsFinder) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	offs, _ := r.Fake.FindOfferings(ctx, q)
	return offs, regionErrs{"us-west-2": errors.New("RequestLimitExceeded"), "eu-north-1": errors.New("connection reset")}
}

// TestSearchWithAHungProvider: with one region
// hanging, `offerings` exited 1 after 60 s blaming "ledger keys: context
// deadline exceeded" — the hung provider had used up the context the
// ledger work then ran under. The answering provider's offerings come
// back with a warning for the hung one, are kept for `book`, and the
// ledger is read and written under a context of its own.
func TestSearchWithAHungProvider(t *testing.T) {
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("honours its context: %v", honours), func(t *testing.T) {
			f := newFixture(t, "", "aws", ledger.Budget{})
			hung := hungFinder{name: "azure", honours: honours, released: make(chan struct{})}
			defer close(hung.released)
			svc := ledger.New(f.st, []domain.Provider{f.fake, hung}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			var res ledger.Search
			var err error
			within(t, 10*time.Second, "the search", func() {
				res, err = svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
			})
			if err != nil {
				t.Fatalf("one provider answered, yet the search failed: %v", err)
			}
			if len(res.Offerings) != 2 || res.SaveErr != nil || len(res.Warnings) != 1 || res.Warnings[0].Provider != "azure" || res.Failed["azure"] == nil {
				t.Fatalf("search %+v", res)
			}
			if _, err := svc.Quote(context.Background(), "cb-cheap"); err != nil {
				t.Fatalf("an offering of the answering provider cannot be booked by id: %v", err)
			}
		})
	}
	t.Run("service timeout", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		hung := hungFinder{name: "azure", released: make(chan struct{})}
		defer close(hung.released)
		svc := ledger.New(f.st, []domain.Provider{f.fake, hung}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: 100 * time.Millisecond})
		var res ledger.Search
		var err error
		within(t, 10*time.Second, "the search", func() {
			res, err = svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
		})
		if err != nil || len(res.Offerings) != 2 || len(res.Warnings) != 1 {
			t.Fatalf("search %+v, %v", res, err)
		}
	})
	t.Run("none answers", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		hung := hungFinder{name: "azure", honours: true}
		svc := ledger.New(f.st, []domain.Provider{hung}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: 50 * time.Millisecond})
		_, err := svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
		if err == nil || !strings.Contains(err.Error(), "azure") || strings.Contains(err.Error(), "ledger") {
			t.Fatalf("no provider answered: %v", err)
		}
	})
}

// TestSearchWarnsPerRegion: a provider that answers for some regions and
// names the others' failures gives its offerings and one warning per
// failed region.
func TestSearchWarnsPerRegion(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	svc := ledger.New(f.st, []domain.Provider{regionsFinder{f.fake}}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	res, err := svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil || len(res.Offerings) != 2 || len(res.Failed) != 0 {
		t.Fatalf("search %+v, %v", res, err)
	}
	var got []string
	for _, w := range res.Warnings {
		got = append(got, w.String())
	}
	if strings.Join(got, "|") != "aws eu-north-1: connection reset|aws us-west-2: RequestLimitExceeded" {
		t.Fatalf("warnings %q", got)
	}
}

// emptyRegionsFinder answers for some regions with nothing on sale and
// names the others' failures.
type emptyRegionsFinder struct{ *ledgertest.Fake }

func (r emptyRegionsFinder) FindOfferings(context.Context, domain.OfferingQuery) ([]domain.Offering, error) {
	return nil, regionErrs{"us-west-2": errors.New("RequestLimitExceeded")}
}

// A provider whose answering regions had nothing on sale answered: the
// search says nothing is on sale there and warns of the region that
// failed, rather than count the whole provider failed (which made
// `offerings` exit 1 as if no region had answered).
func TestSearchRegionsThatAnsweredNothingAnswered(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	svc := ledger.New(f.st, []domain.Provider{emptyRegionsFinder{f.fake}}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	res, err := svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil || len(res.Offerings) != 0 || len(res.Failed) != 0 || len(res.Warnings) != 1 || res.Warnings[0].Region != "us-west-2" {
		t.Fatalf("search %+v, %v", res, err)
	}
}

// TestSearchRanksTheAskedLengthFirst: an offering of another
// length, kept by --flex-duration, comes after every offering of the
// asked length however cheap it is per GPU-hour: `book` of the top row
// never buys a length nobody asked for.
func TestSearchRanksTheAskedLengthFirst(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	start := f.now.Add(48 * time.Hour)
	other := ledgertest.Offering("aws", "cb-43h", start, 43, 1, 1000) // $2.91/GPU-h
	other.FlexLength = true
	fake := ledgertest.New("aws", ledgertest.Offering("aws", "cb-48h", start, 48, 1, 3000), other) // $7.81/GPU-h
	svc := ledger.New(f.st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	res, err := svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour, FlexDuration: 6 * time.Hour})
	if err != nil || len(res.Offerings) != 2 || res.Offerings[0].ID != "cb-48h" || !res.Offerings[1].FlexLength {
		t.Fatalf("search %+v, %v: want the 48 h block first", res.Offerings, err)
	}
	// Kept for book with its mark: the confirmation says it.
	q, err := svc.Quote(context.Background(), "cb-43h")
	if err != nil || !q.Offering.FlexLength {
		t.Fatalf("quote of the 43 h block %+v, %v", q.Offering, err)
	}
}
