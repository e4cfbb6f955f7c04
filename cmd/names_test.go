package cmd

import (
	"strings"
	"testing"
)

// Instance types are read in any case, an Azure size with or without its
// Standard_ prefix, and used in the catalog's spelling; what the catalog
// does not have is refused up front, naming the accepted form.
func TestInstanceTypesAreNormalised(t *testing.T) {
	s := newSession(t, "")
	for typed, want := range map[string]string{
		"G5.XLARGE": "of g5.xlarge in us-east-1", "NC4as_T4_v3": "of Standard_NC4as_T4_v3 in eastus",
		"Standard_NC4as_T4_v3": "of Standard_NC4as_T4_v3 in eastus",
	} {
		region := "us-east-1"
		if strings.Contains(want, "eastus") {
			region = "eastus"
		}
		code, out, errOut := s.run("fleet", "launch", "--region", region, "--instance-types", typed, "--target", "1", "--dry-run")
		if code != 0 || !strings.Contains(out+errOut, want) {
			t.Errorf("fleet launch --instance-types %s: exit %d, want %q:\n%s%s", typed, code, want, out, errOut)
		}
	}
	code, out, errOut := s.run("history", "--region", "eastus", "--instance-type", "nc4as_t4_v3", "--window", "1h", "-o", "csv")
	if code != 0 || !strings.Contains(out, ",Standard_NC4as_T4_v3,") {
		t.Errorf("history --instance-type nc4as_t4_v3: exit %d:\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"history", "--instance-type", "g5"},
		{"fleet", "launch", "--region", "us-east-1", "--instance-types", "g5.xlarge,p5.48xlargee", "--target", "1", "--dry-run"},
	} {
		code, _, errOut := s.run(args...)
		if code != 2 || !strings.Contains(errOut, "the Standard_ prefix may be left out") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming the accepted form", args, code, errOut)
		}
	}
}
