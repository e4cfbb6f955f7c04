package cmd

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help's examples are dated from today: a date in the past in an example
// is one the command itself refuses.
func TestHelpExamplesAreNotInThePast(t *testing.T) {
	today := time.Now().Format("2006-01-02")
	date := regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b`)
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		texts := []string{c.Long, c.Example}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, s := range texts {
			for _, d := range date.FindAllString(s, -1) {
				checked++
				if d < today {
					t.Errorf("%s: help says %s, in the past: %q", c.CommandPath(), d, firstLineWith(s, d))
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newCLI().rootCmd())
	if checked == 0 {
		t.Fatal("no dated example found: the test reads nothing")
	}
}

func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
