package watch

import (
	"context"
	"time"
)

const claimBatch = 16

// deliverLoop sends what is owed until ctx ends, then waits for sends in flight; the rest stays owed.
func (e *Evaluator) deliverLoop(ctx context.Context) {
	defer e.inflight.Wait()
	if len(e.notifiers) == 0 {
		return
	}
	for {
		e.deliverDue(ctx)
		wait := e.opt.Tick
		if _, next, err := e.opt.State.owed(ctx, e.channels); err == nil && !next.IsZero() {
			wait = min(wait, max(time.Until(next), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (e *Evaluator) deliverDue(ctx context.Context) {
	if len(e.notifiers) == 0 || ctx.Err() != nil {
		return
	}
	ds, err := e.opt.State.claim(ctx, e.channels, e.owner, time.Now(), e.lease, claimBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("watch: claim deliveries", "err", err)
		}
		return
	}
	e.dispatch(ctx, ds)
}

// dispatch sends claimed deliveries; those it cannot start go back.
func (e *Evaluator) dispatch(ctx context.Context, ds []delivery) {
	for _, d := range ds {
		n := e.notifiers[d.channel]
		if ctx.Err() != nil || n == nil {
			e.opt.State.release(ctx, d, e.owner)
			continue
		}
		e.inflight.Add(1)
		go func() {
			defer e.inflight.Done()
			// Begun, a send runs to its answer or timeout whatever ctx does.
			e.send(context.WithoutCancel(ctx), n, d)
		}()
	}
}

// send makes one attempt and records how it went.
func (e *Evaluator) send(ctx context.Context, n Notifier, d delivery) {
	err := n.Send(ctx, d.alert)
	var ferr error
	switch {
	case err == nil:
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryDone, "", time.Time{})
	case IsUnconfirmed(err):
		e.log.Warn("watch: an alert was sent but not confirmed; it is not sent again", "channel", n.String(), "alert", d.alert.ID, "rule", d.alert.Rule, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryUnconfirmed, err.Error(), time.Time{})
	case IsPermanent(err) || d.attempts > n.Retries():
		e.log.Warn("watch: gave up telling an alert", "channel", n.String(), "alert", d.alert.ID, "rule", d.alert.Rule, "attempts", d.attempts, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryFailed, err.Error(), time.Time{})
	default:
		next := time.Now().Add(n.Backoff(d.attempts, err))
		e.log.Debug("watch: delivery failed, to be tried again", "channel", n.String(), "alert", d.alert.ID, "attempt", d.attempts, "next", next, "err", err)
		ferr = e.opt.State.finish(ctx, d, e.owner, DeliveryPending, err.Error(), next)
	}
	if ferr != nil {
		e.log.Error("watch: record delivery", "err", ferr)
	}
	poke(e.wake)
}
