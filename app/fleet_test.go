package app

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/domain"
)

// TestCheckFleetTerms: a size, split, strategy or max price no launch
// accepts is refused before anything is built, naming the flag and what
// it accepts.
func TestCheckFleetTerms(t *testing.T) {
	ok := domain.FleetSpec{TargetCapacity: 4, OnDemandBase: 1, Strategy: domain.Strategies[0], MaxPriceUSD: domain.Float(3)}
	if err := CheckFleetTerms(ok); err != nil {
		t.Fatalf("a fleet every launch accepts: %v", err)
	}
	for _, c := range []struct {
		edit func(*domain.FleetSpec)
		want string
	}{
		{func(s *domain.FleetSpec) { s.TargetCapacity = 0 }, "--target 0: want a whole number of instances, 1 to"},
		{func(s *domain.FleetSpec) { s.TargetCapacity = 1_000_000 }, "--target 1000000: want"},
		{func(s *domain.FleetSpec) { s.OnDemandBase = 5 }, "--on-demand-base 5: want 0 to the target (4)"},
		{func(s *domain.FleetSpec) { s.OnDemandBase = -1 }, "--on-demand-base -1: want 0 to the target (4)"},
		{func(s *domain.FleetSpec) { s.Strategy = "cheapest" }, `--strategy "cheapest": want one of ` + strings.Join(domain.Strategies, ", ")},
		{func(s *domain.FleetSpec) { s.MaxPriceUSD = domain.Float(0) }, "--max-price 0: want a positive price"},
		{func(s *domain.FleetSpec) { s.MaxPriceUSD = domain.Float(math.Inf(1)) }, "--max-price +Inf: want a positive price"},
	} {
		spec := ok
		c.edit(&spec)
		err := CheckFleetTerms(spec)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(ue.Msg, c.want) {
			t.Errorf("%+v: %v; want a usage error %q", spec, err, c.want)
		}
	}
}
