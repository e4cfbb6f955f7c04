// Package config holds gpumarket's settings: Default(), then the YAML file,
// then the environment, then flags (applied by cmd), then Validate().
package config

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Config is the whole configuration. Every key of the file is optional.
type Config struct {
	// Providers are the default sources; none configured means "sim".
	Providers  []string `yaml:"providers"`
	providerAt []Pos    // where the file names each provider
	Regions    []string `yaml:"regions"`
	GPUs       []string `yaml:"gpus"`
	Window     Window   `yaml:"window"`
	// Refresh is the clouds' live poll interval.
	Refresh Duration `yaml:"refresh"`
	Risk    Risk     `yaml:"risk"`
	Plan    Plan     `yaml:"plan"`
	Budget  Budget   `yaml:"budget"`
	Sim     Sim      `yaml:"sim"`
	AWS     AWS      `yaml:"aws"`
	Azure   Azure    `yaml:"azure"`
	GCP     GCP      `yaml:"gcp"`
	Serve   Serve    `yaml:"serve"`
	Cache   Cache    `yaml:"cache"`
	// Watch are the alert rules (read by watch); Notify says where alerts go besides the TUI.
	Watch  Rules  `yaml:"watch"`
	Notify Notify `yaml:"notify"`

	// Path is the file the config was read from, "" when none was.
	Path string `yaml:"-"`
}

// Risk holds keys plan: replaced; they stand where a file sets no plan.checkpoint or plan.changeover.
type Risk struct {
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	RestartOverhead    Duration `yaml:"restart_overhead"`
}

// Budget caps what gpumarket may spend.
type Budget struct {
	// MaxBookingUSD caps one purchase's total; 0 means no cap.
	MaxBookingUSD float64 `yaml:"max_booking_usd"`
	// MaxDailyUSD caps the ledger's sum for one UTC day; 0 means no cap.
	MaxDailyUSD float64 `yaml:"max_daily_usd"`
	// MaxIdlePct is the percent of a running row's cost spent idle before a warning; 0: none.
	MaxIdlePct float64 `yaml:"max_idle_pct"`
}

// Sim configures the simulated market.
type Sim struct {
	Seed int64    `yaml:"seed"`
	Tick Duration `yaml:"tick"`
	// Speed runs the simulated clock this many times faster (GPUMARKET_SIM_SPEED); 1 is the wall clock.
	Speed    int `yaml:"speed"`
	speedEnv string
}

// AWS configures the AWS provider.
type AWS struct {
	Profile        string `yaml:"profile"`
	AdvisorURL     string `yaml:"advisor_url"`
	LaunchTemplate string `yaml:"launch_template"`
}

// Azure configures the Azure provider.
type Azure struct {
	SubscriptionID string `yaml:"subscription_id"`
	ResourceGroup  string `yaml:"resource_group"`
	PricesURL      string `yaml:"prices_url"`
	// The spot scale set's image and network.
	ImageID       string `yaml:"image_id"`
	SubnetID      string `yaml:"subnet_id"`
	AdminUsername string `yaml:"admin_username"`
	SSHPublicKey  string `yaml:"ssh_public_key"`
}

// GCP configures the Google Cloud provider; credentials are Google's (README, Clouds).
type GCP struct {
	Project         string       `yaml:"project"` // else the credentials' own, then GOOGLE_CLOUD_PROJECT
	CredentialsFile string       `yaml:"credentials_file"`
	Endpoints       GCPEndpoints `yaml:"endpoints"` // base URLs; empty: Google's
	// The Spot VMs' boot image, subnetwork and disk, or a template.
	Image            string `yaml:"image"`
	Subnetwork       string `yaml:"subnetwork"`
	InstanceTemplate string `yaml:"instance_template"`
	DiskGB           int64  `yaml:"disk_gb"`
}

// GCPEndpoints are the base URLs of the Google APIs gpumarket calls.
type GCPEndpoints struct {
	Compute    string `yaml:"compute"`
	Billing    string `yaml:"billing"`
	Monitoring string `yaml:"monitoring"`
}

// Serve configures `gpumarket serve`.
type Serve struct {
	Listen         string   `yaml:"listen"`
	HostKey        string   `yaml:"host_key"`
	AuthorizedKeys string   `yaml:"authorized_keys"`
	IdleTimeout    Duration `yaml:"idle_timeout"`
	MaxSessions    int      `yaml:"max_sessions"`
	// Roles maps a key fingerprint ("SHA256:…") to "viewer" or "booker".
	Roles map[string]string `yaml:"roles"`
}

// Cache configures the history cache (history.db in the data dir).
type Cache struct {
	// Retention is how much history the cache keeps.
	Retention Window `yaml:"retention"`
}

// Duration is a time.Duration written as Go writes it ("30s", "15m").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Window is a history window written as "24h", "7d" or "2w".
type Window time.Duration

// D returns the time.Duration.
func (w Window) D() time.Duration { return time.Duration(w) }

// Default returns the built-in configuration.
func Default() Config {
	return Config{
		Window:  Window(24 * time.Hour),
		Refresh: Duration(30 * time.Second),
		Risk:    Risk{CheckpointInterval: Duration(15 * time.Minute), RestartOverhead: Duration(6 * time.Minute)},
		Plan:    DefaultPlan(),
		Budget:  Budget{MaxBookingUSD: 5000, MaxDailyUSD: 20000},
		Sim:     Sim{Seed: 1, Tick: Duration(2 * time.Second), Speed: 1},
		AWS:     AWS{AdvisorURL: "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"},
		Azure:   Azure{PricesURL: "https://prices.azure.com/api/retail/prices"},
		Serve:   Serve{Listen: "127.0.0.1:2222", IdleTimeout: Duration(30 * time.Minute), MaxSessions: 100},
		Cache:   Cache{Retention: Window(domain.MaxWindow)},
	}
}

// Plan is the default job (`plan:`) the Market's EFF $/GPU-H prices for, and where `plan` starts.
type Plan struct {
	// GPUs and Hours are the default job's size and length.
	GPUs  int     `yaml:"gpus"`
	Hours float64 `yaml:"hours"`
	// Checkpoint is the interval between checkpoints; 0s: the job cannot checkpoint.
	Checkpoint Duration `yaml:"checkpoint"`
	// Changeover is what a start or switch costs in wall time.
	Changeover Duration `yaml:"changeover"`
	// Speed overrides GPU models' training speeds relative to an H100.
	Speed map[string]float64 `yaml:"speed"`
	// Priors override a GPU class's spot risk assumed when nothing better is known.
	Priors map[string]Prior `yaml:"priors"`
}

// oldRisk applies the risk: keys a file set (pos) to the plan: keys it did not set.
func (c *Config) oldRisk(pos map[string]Pos) {
	set := func(k string) bool { _, ok := pos[k]; return ok }
	if set("risk.checkpoint_interval") && !set("plan.checkpoint") {
		c.Plan.Checkpoint = c.Risk.CheckpointInterval
	}
	if set("risk.restart_overhead") && !set("plan.changeover") {
		c.Plan.Changeover = c.Risk.RestartOverhead
	}
}

// Prior is a GPU class's spot risk at the middle bucket ("10-15%").
type Prior struct {
	InterruptionsPerHour float64 `yaml:"interruptions_per_hour"`
	GapMedianHours       float64 `yaml:"gap_median_hours"`
	Availability         float64 `yaml:"availability"`
}

// DefaultPlan is 8 GPUs for 24 hours, 15-minute checkpoints and a 12-minute changeover (0.2-0.3 h measured).
func DefaultPlan() Plan {
	return Plan{GPUs: 8, Hours: 24, Checkpoint: Duration(15 * time.Minute), Changeover: Duration(12 * time.Minute)}
}

func (p *Plan) validate() error {
	if p.GPUs < 1 || p.GPUs > 512 {
		return keyErr("plan.gpus", "%d; want a whole number of GPUs from 1 to 512", p.GPUs)
	}
	if bad(p.Hours) || p.Hours <= 0 || p.Hours > 182*24 {
		return keyErr("plan.hours", "%v; want hours of work above 0, at most 4368 (26 weeks)", p.Hours)
	}
	if p.Checkpoint.D() < 0 {
		return keyErr("plan.checkpoint", "%s; want a duration such as 15m, or 0s for a job that cannot checkpoint", p.Checkpoint.D())
	}
	if c := p.Changeover.D(); c < 0 || c > 24*time.Hour {
		return keyErr("plan.changeover", "%s; want a duration from 0s to 24h such as 12m", c)
	}
	speed, err := canonicalKeys(p.Speed, "plan.speed")
	if err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(speed)) {
		if v := speed[g]; bad(v) || v <= 0 || v > 100 {
			return keyErr("plan.speed."+g, "%v; want a speed relative to an H100 above 0 (an A100 is about 0.45)", v)
		}
	}
	p.Speed = speed
	priors, err := canonicalKeys(p.Priors, "plan.priors")
	if err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(priors)) {
		v, key := priors[g], "plan.priors."+g
		if bad(v.InterruptionsPerHour) || v.InterruptionsPerHour <= 0 || v.InterruptionsPerHour > 100 {
			return keyErr(key+".interruptions_per_hour", "%v; want interruptions per hour above 0 (the traces show 0.1-1.4)", v.InterruptionsPerHour)
		}
		if bad(v.GapMedianHours) || v.GapMedianHours <= 0 || v.GapMedianHours > 1000 {
			return keyErr(key+".gap_median_hours", "%v; want hours above 0 (the traces show 0.38-0.70)", v.GapMedianHours)
		}
		if bad(v.Availability) || v.Availability <= 0 || v.Availability > 1 {
			return keyErr(key+".availability", "%v; want a share of time above 0, at most 1", v.Availability)
		}
	}
	p.Priors = priors
	return nil
}

// canonicalKeys respells m's GPU keys the catalog's way, refusing unknown and repeated ones.
func canonicalKeys[V any](m map[string]V, key string) (map[string]V, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		g, ok := domain.CanonicalGPU(k)
		if !ok {
			return nil, keyErr(key+"."+k, "unknown GPU %q; want one of %s", k, strings.Join(domain.GPUModels, ", "))
		}
		if _, dup := out[g]; dup {
			return nil, keyErr(key+"."+k, "%s is set twice", g)
		}
		out[g] = m[k]
	}
	return out, nil
}
