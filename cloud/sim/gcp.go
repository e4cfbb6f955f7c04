package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpumarket/gpumarket/domain"
)

// The market's Google Cloud (docs/DESIGN.md): no bucket is shown, as Google publishes none.

var gcpRegions = []region{
	{Name: "us-central1", Zones: []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"}, UTCOffset: -6, Busy: 0.3, PriceMult: 1.00, AWSTwin: "us-east-2"},
	{Name: "us-east4", Zones: []string{"us-east4-a", "us-east4-b", "us-east4-c"}, UTCOffset: -5, Busy: 0.2, PriceMult: 1.06, AWSTwin: "us-east-1"},
	{Name: "us-east5", Zones: []string{"us-east5-a", "us-east5-b", "us-east5-c"}, UTCOffset: -5, Busy: 0.0, PriceMult: 1.00, AWSTwin: "us-east-2"},
	{Name: "us-west1", Zones: []string{"us-west1-a", "us-west1-b", "us-west1-c"}, UTCOffset: -8, Busy: 0.1, PriceMult: 1.00, AWSTwin: "us-west-2"},
	{Name: "europe-west4", Zones: []string{"europe-west4-a", "europe-west4-b", "europe-west4-c"}, UTCOffset: 1, Busy: 0.2, PriceMult: 1.10, AWSTwin: "eu-central-1"},
	{Name: "asia-northeast1", Zones: []string{"asia-northeast1-a", "asia-northeast1-b", "asia-northeast1-c"}, UTCOffset: 9, Busy: 0.3, PriceMult: 1.28, AWSTwin: "ap-northeast-1"},
	{Name: "asia-southeast1", Zones: []string{"asia-southeast1-a", "asia-southeast1-b", "asia-southeast1-c"}, UTCOffset: 8, Busy: 0.0, PriceMult: 1.20, AWSTwin: "ap-southeast-2"},
}

var gcpFamilies = []family{
	{Name: "A3 High", Cloud: domain.CloudGCP, Types: []string{"a3-highgpu-8g"}, Twin: "p5.48xlarge",
		Regions: []string{"us-central1", "us-east4", "us-east5", "us-west1", "europe-west4", "asia-northeast1", "asia-southeast1"}, MinZones: 1, MaxZones: 2},
	{Name: "A3 Mega", Cloud: domain.CloudGCP, Types: []string{"a3-megagpu-8g"}, Twin: "p5.48xlarge",
		Regions: []string{"us-central1", "us-east4", "us-east5", "europe-west4", "asia-northeast1"}, MinZones: 1, MaxZones: 2},
	{Name: "A3 Ultra", Cloud: domain.CloudGCP, Types: []string{"a3-ultragpu-8g"}, Twin: "p5e.48xlarge",
		Regions: []string{"us-central1", "us-east5", "europe-west4"}, MinZones: 1, MaxZones: 1},
	{Name: "A2", Cloud: domain.CloudGCP, Types: []string{"a2-highgpu-1g", "a2-highgpu-8g"}, Twin: "p4d.24xlarge",
		Regions: []string{"us-central1", "us-east4", "us-west1", "europe-west4", "asia-northeast1", "asia-southeast1"}, MinZones: 2, MaxZones: 3},
	{Name: "A2 Ultra", Cloud: domain.CloudGCP, Types: []string{"a2-ultragpu-1g", "a2-ultragpu-8g"}, Twin: "p4de.24xlarge",
		Regions: []string{"us-central1", "us-east4", "europe-west4", "asia-southeast1"}, MinZones: 1, MaxZones: 2},
	{Name: "G2", Cloud: domain.CloudGCP, Types: []string{"g2-standard-4", "g2-standard-8", "g2-standard-24", "g2-standard-48"}, Twin: "g6.xlarge",
		Regions: []string{"us-central1", "us-east4", "us-east5", "us-west1", "europe-west4", "asia-northeast1", "asia-southeast1"}},
}

// gcpListPrice is on-demand in us-central1 (A3 Mega and Ultra approximate).
var gcpListPrice = map[string]float64{
	"a3-highgpu-8g": 88.25, "a3-megagpu-8g": 92.7, "a3-ultragpu-8g": 84.81,
	"a2-highgpu-1g": 3.6731, "a2-highgpu-8g": 29.3847, "a2-ultragpu-1g": 5.0688, "a2-ultragpu-8g": 40.5503,
	"g2-standard-4": 0.7069, "g2-standard-8": 0.8536, "g2-standard-24": 2.0004, "g2-standard-48": 4.0008,
}

func listPriceOf(t string) float64 {
	if p, ok := gcpListPrice[t]; ok {
		return p
	}
	return listPrice[t]
}

const sourceGCP = "sim (Google publishes no interruption rate; 30 s preemption notice)"

// gcpCalendar are the types the market sells calendar-mode reservations of.
var gcpCalendar = map[string]bool{"a3-highgpu-8g": true, "a3-megagpu-8g": true, "a3-ultragpu-8g": true, "a2-ultragpu-8g": true}

var calendarTerms = domain.CalendarTerms

const gcpCalendarNote = "simulated Google calendar-mode future reservation: held and billed for the whole window, used or not; its VMs end with it; priced at on-demand rates, the most it costs"

func asCalendar(o *domain.Offering, od float64) {
	o.Kind, o.Note = domain.KindCalendar, gcpCalendarNote
	billHourly(o, od)
}

// billHourly prices o at od an instance-hour over its window.
func billHourly(o *domain.Offering, od float64) {
	o.HourlyUSD = od * float64(o.InstanceCount)
	o.UpfrontUSD = math.Round(o.HourlyUSD*o.End.Sub(o.Start).Hours()*100) / 100
}

func gcpRef(o domain.Offering, h uint64) string {
	return fmt.Sprintf("projects/gpumarket-sim/zones/%s/futureReservations/gpumarket-%016x", o.Zone, h)
}

// checkGCPFleet refuses what Google's Spot VMs do not take.
func checkGCPFleet(c domain.Cloud, s *domain.FleetSpec) error {
	if c == domain.CloudGCP && s.MaxPriceUSD != nil {
		return errors.New("fleet max price: Google Spot VMs take no maximum price (their price changes at most once a month); drop it")
	}
	return nil
}

// A Google pool's price steps once in 30 days, as Google moves Spot prices.
const monthSec = 30 * 24 * 3600

func (m *model) monthOffset() int64 { return int64(m.id % monthSec) }

func (m *model) monthAt(k int64) (at, ticks int64) {
	walk := 2*unit(mix(m.id^uint64(k)*0x9e3779b97f4a7c15)) - 1
	r := clip(m.base * math.Exp(0.25*m.vol*walk))
	return k*monthSec + m.monthOffset(), int64(math.Round(m.od * r * priceScale))
}

// monthlyTicks appends the month starts in (from, to] and their prices.
func (m *model) monthlyTicks(at, q []int64, from, to int64) ([]int64, []int64) {
	for k := floorDiv(from-m.monthOffset(), monthSec) + 1; ; k++ {
		t, p := m.monthAt(k)
		if t > to {
			return at, q
		}
		at, q = append(at, t), append(q, p)
	}
}
