package ledger

import (
	"errors"
	"math"
	"testing"
)

// TestCheckBudgetContract: an unknown cost never passes, caps or not (no
// caller hands one in today — NaN fees cannot be kept in the offering
// cache, and a fleet's unknown estimate is refused before — but the
// check is the last word on it); a cap is the most one may spend.
func TestCheckBudgetContract(t *testing.T) {
	s := &Service{opt: Options{Budget: Budget{MaxBookingUSD: 100, MaxDailyUSD: 300}}}
	free := &Service{}
	for _, c := range []struct {
		svc         *Service
		cost, spent float64
		ok          bool
	}{
		{free, math.NaN(), 0, false},
		{s, math.NaN(), 0, false},
		{free, 1e9, 1e9, true},
		{s, 100, 200, true},
		{s, 100.01, 0, false},
		{s, 100, 200.01, false},
	} {
		err := c.svc.checkBudget(c.cost, c.spent)
		if (err == nil) != c.ok {
			t.Errorf("cost %v after %v (budget %+v): %v, want ok %v", c.cost, c.spent, c.svc.opt.Budget, err, c.ok)
		}
		if err != nil && !math.IsNaN(c.cost) && !errors.Is(err, ErrBudget) {
			t.Errorf("over a cap without a *BudgetError: %v", err)
		}
	}
}
