package watch

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Alert is one firing of a rule; its JSON (stdin, webhook body) is flat
// snake_case, null where a field is not the kind's.
type Alert struct {
	ID        int64     `json:"id"` // the State's row id: alerts' order
	Rule      string    `json:"rule"`
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
	Text      string    `json:"text"`
	Simulated bool      `json:"simulated"`

	Provider     *string  `json:"provider"`
	Region       *string  `json:"region"`
	Zone         *string  `json:"zone"`
	InstanceType *string  `json:"instance_type"`
	GPUModel     *string  `json:"gpu_model"`
	GPUCount     *float64 `json:"gpu_count"`
	USDHour      *float64 `json:"usd_hour"`
	USDGPUHour   *float64 `json:"usd_gpu_hour"` // a block's, or a plan's per useful GPU-hour
	// TotalUSD: a block's upfront price, a plan's expected cost, or an idle row's cost so far.
	TotalUSD       *float64   `json:"total_usd"`
	ThresholdUSD   *float64   `json:"threshold_usd"`
	OfferingID     *string    `json:"offering_id"` // for `gpumarket book ID`
	Start          *time.Time `json:"start"`
	End            *time.Time `json:"end"`
	Bucket         *string    `json:"bucket"`
	PreviousBucket *string    `json:"previous_bucket"`
	Strategy       *string    `json:"strategy"`
	LedgerIDs      []string   `json:"ledger_ids"`
	IdlePct        *float64   `json:"idle_pct"`
	IdleUSD        *float64   `json:"idle_usd"`
	ThresholdPct   *float64   `json:"threshold_pct"`
	Tell           []string   `json:"tell"`
	// IdempotencyKey lets a receiver that got it twice tell.
	IdempotencyKey string `json:"idempotency_key"`
}

// Tells reports whether the alert goes to where.
func (a Alert) Tells(where string) bool { return slices.Contains(a.Tell, where) }

// JSON is the alert as notifiers send it.
func (a Alert) JSON() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic("watch: marshal alert: " + err.Error())
	}
	return b
}

// Line is the alert as `gpumarket watch` logs it.
func (a Alert) Line() string {
	return a.At.UTC().Format(time.RFC3339) + " alert " + a.Rule + ": " + a.Text
}

// Env is the alert as a command's environment.
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
	Channel  string
	State    string
	Attempts int
	Error    string
}

// Delivery states. Unconfirmed: sent whole, no answer; not sent again.
const (
	DeliveryPending     = "pending"
	DeliverySending     = "sending"
	DeliveryDone        = "delivered"
	DeliveryFailed      = "failed"
	DeliveryUnconfirmed = "unconfirmed"
)

// Record is an alert with its deliveries, for the Alerts view.
type Record struct {
	Alert
	Deliveries []DeliveryStatus
}

// outward lists the channels a notifier delivers: the TUI's is memory.
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

func simNote(simulated bool) string {
	if simulated {
		return " (SIMULATED MARKET)"
	}
	return ""
}

// source ends a pool alert's text: its provider, or that it is simulated.
func source(provider string, simulated bool) string {
	if simulated {
		return simNote(true)
	}
	return " (" + provider + ")"
}
