package config

import (
	"os"
	"regexp"
)

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

// EnvGCPProject is Google's own variable for the project.
const EnvGCPProject = "GOOGLE_CLOUD_PROJECT"

var gcpProjectRE = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$|^[a-z][-a-z0-9.:]{4,60}[a-z0-9]$`)

func (c *Config) validateGCP() error {
	g := c.GCP
	if g.Project == "" {
		g.Project = os.Getenv(EnvGCPProject)
	}
	if g.Project != "" && !gcpProjectRE.MatchString(g.Project) {
		return keyErr("gcp.project", "bad project id %q; want 6 to 30 lower-case letters, digits and dashes, such as my-project-123", g.Project)
	}
	for key, u := range map[string]string{"gcp.endpoints.compute": g.Endpoints.Compute, "gcp.endpoints.billing": g.Endpoints.Billing,
		"gcp.endpoints.monitoring": g.Endpoints.Monitoring} {
		if u != "" && !httpURL(u) {
			return keyErr(key, "bad URL %q; want an http:// or https:// base URL such as https://compute.googleapis.com/compute/v1/", u)
		}
	}
	if g.DiskGB < 0 || g.DiskGB > 65536 {
		return keyErr("gcp.disk_gb", "%d; want a boot disk size in GB from 10 to 65536 (0: 200)", g.DiskGB)
	}
	return nil
}
