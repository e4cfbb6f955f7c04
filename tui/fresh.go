package tui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// Fresh terms: the service refuses terms other than those shown; the box then
// shows the new ones and asks again (docs/DESIGN.md, The TUI).

// maxQuoteRenewals: a provider whose terms change at every look is said to.
const maxQuoteRenewals = 3

// termsChanged is err as a refusal of changed terms, else nil.
func termsChanged(err error) *ledger.TermsChangedError {
	var tc *ledger.TermsChangedError
	if errors.As(err, &tc) {
		return tc
	}
	return nil
}

// renewBuy shows the purchase of o on the changed terms tc; they are compared
// with what the user last could say yes to (changed replaced, if o is renewed).
func renewBuy(svc *ledger.Service, actor string, o domain.Offering, now time.Time, changed, tc *ledger.TermsChangedError, quoted int) quoteAnswer {
	if quoted >= maxQuoteRenewals {
		return quoteAnswer{err: fmt.Errorf("the terms changed %d times while being checked: nothing was bought; search again in a while: %w", quoted+1, tc)}
	}
	seen := o
	if changed != nil {
		seen = changed.Shown
	}
	return quoteAnswer{renewed: buyAction(svc, actor, tc.Now, now, &ledger.TermsChangedError{Shown: seen, Now: tc.Now, Why: tc.Why}, quoted+1)}
}

// termsChange says what changed, the total first.
func termsChange(tc *ledger.TermsChangedError) string {
	was, now := tc.Shown, tc.Now
	if ledger.SameTerms(was, now) {
		// Changed and changed back while being checked: what was shown stands.
		return "Checked again with the provider: the terms are those shown before. Nothing was bought yet."
	}
	var diffs []string
	if d := now.UpfrontUSD - was.UpfrontUSD; math.Round(d*100) != 0 {
		diffs = append(diffs, fmt.Sprintf("total $%.2f → $%.2f (%s)", was.UpfrontUSD, now.UpfrontUSD, signedUSD(d)))
	}
	if now.StartsOnPurchase && was.StartsOnPurchase {
		rate := func(o domain.Offering) float64 { return o.UpfrontUSD / o.DurationHours() }
		if r0, r1 := rate(was), rate(now); math.Round(r0*100) != math.Round(r1*100) {
			diffs = append(diffs, fmt.Sprintf("$%.2f → $%.2f an hour", r0, r1))
		}
	} else if !now.Start.Equal(was.Start) {
		diffs = append(diffs, "start "+stamp(was.Start)+" → "+stamp(now.Start))
	}
	if !now.End.Equal(was.End) {
		diffs = append(diffs, "end "+stamp(was.End)+" → "+stamp(now.End))
	}
	if now.InstanceCount != was.InstanceCount || now.InstanceType != was.InstanceType {
		diffs = append(diffs, fmt.Sprintf("%d × %s → %d × %s", was.InstanceCount, present.DisplayType(was.InstanceType), now.InstanceCount, present.DisplayType(now.InstanceType)))
	}
	if now.Region != was.Region || now.Zone != was.Zone {
		diffs = append(diffs, present.Place(was.Region, was.Zone)+" → "+present.Place(now.Region, now.Zone))
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "its terms as the provider describes them now")
	}
	return fmt.Sprintf("Changed since shown (%s): %s. Nothing was bought; the new terms follow.", tc.Why, strings.Join(diffs, "; "))
}

// termsTitle is a renewed purchase's question, the new total first.
func termsTitle(o domain.Offering, tc *ledger.TermsChangedError) string {
	if ledger.SameTerms(tc.Shown, o) {
		return fmt.Sprintf("Checked again: buy this %s for $%.2f?", o.Terms().Name, o.UpfrontUSD)
	}
	return fmt.Sprintf("The terms changed: buy this %s for $%.2f now (shown $%.2f)?", o.Terms().Name, o.UpfrontUSD, tc.Shown.UpfrontUSD)
}

// stamp is a time of a change line, in UTC: both sides in one zone.
func stamp(t time.Time) string { return t.UTC().Format("01-02 15:04 UTC") }

func signedUSD(d float64) string {
	if d < 0 {
		return fmt.Sprintf("-$%.2f", -d)
	}
	return fmt.Sprintf("+$%.2f", d)
}

// launchSend launches spec at the estimate est shown; with a budget cap,
// risen prices launch nothing and ask again (relaunchAction).
func launchSend(svc *ledger.Service, actor string, spec domain.FleetSpec, est ledger.FleetEstimate) func(context.Context) outcome {
	return func(ctx context.Context) outcome {
		res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: est, Actor: actor})
		var ec *ledger.EstimateChangedError
		if errors.As(err, &ec) {
			return outcome{renewed: relaunchAction(svc, actor, spec, ec)}
		}
		notice := fmt.Sprintf("launched %s (ledger row %s)", res.Row.ProviderRef, short(res.Row.ID))
		if s := res.Short(); s != "" {
			notice += ": " + s
		}
		shown := err
		switch {
		case err == nil && res.Row.State == ledger.StateFailed:
			// Taken but nothing launched (no spot capacity): a failure, nothing bills.
			shown = fmt.Errorf("not launched: %s (ledger row %s)", res.Row.Error, short(res.Row.ID))
		case res.Row.State == ledger.StateScheduled && res.Row.ProviderRef == "":
			notice = fmt.Sprintf("scheduled: gpumarket launches it at its start (ledger row %s)", short(res.Row.ID))
		case res.Row.State == ledger.StateScheduled:
			notice = fmt.Sprintf("scheduled at the cloud: %s (ledger row %s)", res.Row.ProviderRef, short(res.Row.ID))
		}
		return outcome{err: shown, then: fleetLaunchedMsg{res: res, err: err}, notice: notice}
	}
}

// relaunchAction launches spec at its risen estimate, shown and asked again.
func relaunchAction(svc *ledger.Service, actor string, spec domain.FleetSpec, ec *ledger.EstimateChangedError) *moneyAction {
	est := ec.Now
	verb, sending := "launch", "launching"
	if spec.Start.After(svc.Now()) {
		verb, sending = "schedule", "scheduling"
	}
	return &moneyAction{
		title: fmt.Sprintf("The prices went up: %s %s in %s at about $%.2f an hour now (shown $%.2f)?%s",
			verb, fleetKind(spec), spec.Region, est.USDHour, ec.Shown.USDHour, simLaunch(svc, spec.Provider)),
		verb: verb,
		lines: append([]string{fmt.Sprintf("Changed since shown: about $%.2f → $%.2f an hour (%s). Nothing was launched; the new estimate follows.",
			ec.Shown.USDHour, est.USDHour, signedUSD(est.USDHour-ec.Shown.USDHour))}, fleetLines(spec, est, svc.Now())...),
		checking: "asking the provider for a dry run", sending: sending,
		quote: func(ctx context.Context) quoteAnswer {
			dry, err := dryLaunch(ctx, svc, spec, est)
			if err != nil {
				return quoteAnswer{err: err}
			}
			return quoteAnswer{dryRun: dry, send: launchSend(svc, actor, spec, est)}
		},
	}
}
