package watch

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Alert is one firing of a rule. Its JSON is a flat object with
// snake_case keys, as the CLI's rows are: what a notify command reads on
// its stdin and a webhook receives (Slack reads `text`). Fields that do
// not apply to the rule's kind are null.
type Alert struct {
	// ID orders alerts; it is the State's row id.
	ID   int64     `json:"id"`
	Rule string    `json:"rule"`
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Text is the alert in one line, for people (Slack's `text`).
	Text string `json:"text"`
	// Simulated is set when what the alert is about comes from the
	// simulated market: nothing in it is real.
	Simulated bool `json:"simulated"`

	Provider     *string  `json:"provider"`
	Region       *string  `json:"region"`
	Zone         *string  `json:"zone"`
	InstanceType *string  `json:"instance_type"`
	GPUModel     *string  `json:"gpu_model"`
	GPUCount     *float64 `json:"gpu_count"`
	// USDHour is a spot rule's price per instance-hour.
	USDHour *float64 `json:"usd_hour"`
	// USDGPUHour is a block's price per GPU-hour, or a plan's cost per
	// useful GPU-hour.
	USDGPUHour *float64 `json:"usd_gpu_hour"`
	// TotalUSD is a block's upfront price, a plan's expected cost, or
	// what an idle rule's row has cost so far (a block's fee for the
	// hours it has run).
	TotalUSD *float64 `json:"total_usd"`
	// ThresholdUSD is the rule's figure the value crossed.
	ThresholdUSD *float64 `json:"threshold_usd"`
	// OfferingID is a block to book with `gpumarket book ID`.
	OfferingID *string    `json:"offering_id"`
	Start      *time.Time `json:"start"`
	End        *time.Time `json:"end"`
	// Bucket and PreviousBucket are a bucket rule's interruption buckets.
	Bucket         *string `json:"bucket"`
	PreviousBucket *string `json:"previous_bucket"`
	// Strategy is a plan rule's best strategy.
	Strategy *string `json:"strategy"`
	// LedgerIDs are a starts_in rule's booked rows, or an idle rule's
	// running rows.
	LedgerIDs []string `json:"ledger_ids"`
	// IdlePct is an idle rule's row's share of its cost so far paid for
	// idle GPU-hours (percent), IdleUSD that part of its cost, and
	// ThresholdPct the rule's figure.
	IdlePct      *float64 `json:"idle_pct"`
	IdleUSD      *float64 `json:"idle_usd"`
	ThresholdPct *float64 `json:"threshold_pct"`
	// Tell is where the alert goes (Tells).
	Tell []string `json:"tell"`
	// IdempotencyKey is the alert's own: a receiver that got it twice
	// (a send cut short after the request went out) can tell.
	IdempotencyKey string `json:"idempotency_key"`
}

// Tells reports whether the alert goes to where (TellTUI, …).
func (a Alert) Tells(where string) bool { return slices.Contains(a.Tell, where) }

// JSON is the alert as notifiers send it.
func (a Alert) JSON() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		// Every field is a plain value: this cannot fail.
		panic("watch: marshal alert: " + err.Error())
	}
	return b
}

// Line is the alert as `gpumarket watch` logs it: the time, the rule and
// the text.
func (a Alert) Line() string {
	return a.At.UTC().Format(time.RFC3339) + " alert " + a.Rule + ": " + a.Text
}

// Env is the alert as a notify command's environment variables.
func (a Alert) Env() []string {
	return []string{
		"GPUMARKET_ALERT_ID=" + strconv.FormatInt(a.ID, 10),
		"GPUMARKET_ALERT_RULE=" + a.Rule,
		"GPUMARKET_ALERT_KIND=" + a.Kind,
		"GPUMARKET_ALERT_AT=" + a.At.UTC().Format(time.RFC3339),
		"GPUMARKET_ALERT_TEXT=" + a.Text,
		"GPUMARKET_ALERT_SIMULATED=" + strconv.FormatBool(a.Simulated),
		"GPUMARKET_ALERT_JSON=" + string(a.JSON()),
	}
}

// DeliveryStatus is where one outward delivery of an alert stands.
type DeliveryStatus struct {
	Channel string
	// State is DeliveryPending, DeliverySending, DeliveryDone or
	// DeliveryFailed.
	State    string
	Attempts int
	Error    string
}

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliverySending = "sending"
	DeliveryDone    = "delivered"
	DeliveryFailed  = "failed"
	// DeliveryUnconfirmed: sent whole, no answer; not sent again.
	DeliveryUnconfirmed = "unconfirmed"
)

// Record is an alert with where its deliveries stand, for the Alerts
// view.
type Record struct {
	Alert
	Deliveries []DeliveryStatus
}

// outward lists the channels of tell that a notifier delivers (the TUI
// is told in memory).
func outward(tell []string) []string {
	var out []string
	for _, t := range tell {
		if t != TellTUI {
			out = append(out, t)
		}
	}
	return out
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func fp(v float64) *float64 { return &v }

func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// simNote ends the text of an alert about the simulated market.
func simNote(simulated bool) string {
	if simulated {
		return " (SIMULATED MARKET)"
	}
	return ""
}

// source ends the text of an alert about a pool: its provider, or that
// it is simulated (which says more than the simulated market's name).
func source(provider string, simulated bool) string {
	if simulated {
		return simNote(true)
	}
	return " (" + provider + ")"
}
