package watch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
)

// countingNotifier fails its first fail sends, then succeeds.
type countingNotifier struct {
	fail  int32
	sends atomic.Int32
}

func (c *countingNotifier) Channel() string        { return TellWebhook }
func (c *countingNotifier) Timeout() time.Duration { return time.Second }
func (c *countingNotifier) Retries() int           { return 3 }
func (c *countingNotifier) String() string         { return "counting" }
func (c *countingNotifier) Backoff(int, error) time.Duration {
	return 20 * time.Millisecond
}
func (c *countingNotifier) Send(context.Context, Alert) error {
	if c.sends.Add(1) <= c.fail {
		return errors.New("503")
	}
	return nil
}

func notifierEvaluator(t *testing.T, n Notifier, tick time.Duration) *Evaluator {
	notify := config.Notify{Webhook: &config.Webhook{URL: "http://x"}}
	return newEvaluator(t, Options{Now: newClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)).Now, Tick: tick,
		Notify: notify, Notifiers: []Notifier{n}, Rules: validRules(t, notify, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
}

// A running evaluator retries a failed delivery after its backoff, not
// at its next tick: the wait is the sooner of the two.
func TestRetryAfterTheBackoffNotTheTick(t *testing.T) {
	n := &countingNotifier{fail: 1}
	e := notifierEvaluator(t, n, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	raiseOne(t, e)
	waitFor(t, "the retry", func() bool { return n.sends.Load() == 2 })
	waitFor(t, "the delivery to be recorded", func() bool {
		d := deliveries(t, e)
		return len(d) == 1 && d[0].State == DeliveryDone
	})
}

// Deliveries claimed as the evaluator stops are put back, not sent.
func TestClaimedAtShutdownArePutBack(t *testing.T) {
	n := &countingNotifier{}
	e := notifierEvaluator(t, n, time.Hour)
	raiseOne(t, e)
	ds, err := e.opt.State.claim(context.Background(), e.channels, e.owner, time.Now(), time.Minute, claimBatch)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claimed %v, %v", ds, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.dispatch(ctx, ds)
	e.inflight.Wait()
	if n.sends.Load() != 0 {
		t.Errorf("%d sends after shutdown began", n.sends.Load())
	}
	if d := deliveries(t, e); d[0].State != DeliveryPending || d[0].Attempts != 0 {
		t.Errorf("delivery %+v, want pending for the next run", d)
	}
}
