package config

import (
	"strings"
	"testing"
	"time"
)

// cache.retention is a window (default 90d, what the clouds keep); a bad
// value names the key, its place and what is accepted.
func TestCacheRetention(t *testing.T) {
	clearEnv(t)
	if d := Default().Cache.Retention.D(); d != 90*24*time.Hour {
		t.Fatalf("default retention %s, want 90d", d)
	}
	c, err := Load(writeFile(t, "cache: {retention: 30d}\n"))
	if err != nil || c.Cache.Retention.D() != 30*24*time.Hour {
		t.Fatalf("30d: %v, %v", c.Cache.Retention.D(), err)
	}
	for _, tc := range []struct{ body, want string }{
		{"cache: {retention: 91d}\n", "1:20: cache.retention: window \"91d\" is longer than 90 days"},
		{"cache: {retention: 0d}\n", "1:20: cache.retention: window \"0d\": want a whole number"},
		{"cache: {retention: soon}\n", "cache.retention"},
		{"cache: {retain: 30d}\n", `unknown key "retain" in cache; want one of retention`},
	} {
		_, err := Load(writeFile(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.body, err, tc.want)
		}
	}
	c = Default()
	c.Cache.Retention = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "cache.retention") {
		t.Errorf("Validate of retention 0: %v", err)
	}
}
