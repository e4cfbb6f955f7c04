package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// contractDoc reads the table of JSON and CSV fields in docs/DESIGN.md's
// "The command line": the first backticked name of each row's first cell
// ("prices", "usage --by day", "notify.command") to its fields.
func contractDoc(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "**The contract.**")
	if start < 0 {
		t.Fatal("docs/DESIGN.md has no **The contract.** paragraph")
	}
	doc = doc[start:]
	doc = doc[:strings.Index(doc, "\n## ")]
	row := regexp.MustCompile("(?m)^\\| [^`|]*`([^`]+)`[^|]*\\| `([^`]+)` \\|$")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		out[m[1]] = strings.Split(m[2], ", ")
	}
	if len(out) == 0 {
		t.Fatal("no rows in docs/DESIGN.md's table of fields")
	}
	return out
}

// csvHeader is the header row the CSV writer writes for rows.
func csvHeader(t *testing.T, rows any) []string {
	t.Helper()
	var b bytes.Buffer
	if err := writeRows(&b, formatCSV, rows); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(b.String()), ",")
}

// jsonKeys is the keys of a JSON object, in order.
func jsonKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 { // a key: its value is decoded whole below
				keys = append(keys, v)
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return keys
}

// TestDesignListsTheContract: docs/DESIGN.md's table of fields is what
// every output writes, in order, and what the tests of each command hold
// its rows to; the README lists the same fields where it names them.
func TestDesignListsTheContract(t *testing.T) {
	doc := contractDoc(t)
	code := map[string][]string{
		"prices":                 csvHeader(t, []present.Row{}),
		"history":                csvHeader(t, []historyRow{}),
		"offerings":              csvHeader(t, []present.OfferingRow{}),
		"ledger":                 csvHeader(t, []present.LedgerRow{}),
		"book --dry-run":         csvHeader(t, []dryRunRow{}),
		"fleet launch --dry-run": csvHeader(t, []fleetDryRunRow{}),
		"plan":                   csvHeader(t, []present.PlanRow{}),
		"backtest":               csvHeader(t, []backtestRow{}),
		"backtest --predict":     csvHeader(t, []backtestPredictRow{}),
		"usage":                  csvHeader(t, []ledger.UsageRow{}),
		"usage --by day":         csvHeader(t, []present.DayTotal{}),
		"usage --by actor":       csvHeader(t, []present.ActorTotal{}),
		"cache info":             csvHeader(t, []cacheRow{}),
		"job show":               csvHeader(t, []jobRow{}),
		"notify.command":         jsonKeys(t, watch.Alert{}.JSON()),
	}
	for name, fields := range code {
		if !slices.Equal(doc[name], fields) {
			t.Errorf("%s writes\n  %s\ndocs/DESIGN.md says\n  %s", name, strings.Join(fields, ", "), strings.Join(doc[name], ", "))
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/DESIGN.md lists the fields of %q, which this test does not know", name)
		}
	}
	for name, held := range map[string][]string{"prices": pricesFields, "history": historyFields, "offerings": offeringsFields,
		"ledger": ledgerFields, "plan": planFields, "job show": jobFields} {
		if !slices.Equal(doc[name], held) {
			t.Errorf("the tests hold %s to\n  %s\ndocs/DESIGN.md says\n  %s", name, strings.Join(held, ", "), strings.Join(doc[name], ", "))
		}
	}

	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	for _, name := range []string{"prices", "history", "offerings", "ledger", "plan", "backtest", "usage"} {
		if list := "`" + strings.Join(doc[name], ", ") + "`"; !strings.Contains(readme, list) {
			t.Errorf("the README does not list %s's fields as %s", name, list)
		}
	}
	// The README's example alert is the alert's JSON, key for key.
	block := regexp.MustCompile("(?s)```json\n(\\{\"id\".*?\"rule\".*?)```").FindStringSubmatch(string(b))
	if block == nil {
		t.Fatal("the README has no example alert")
	}
	if keys := jsonKeys(t, []byte(block[1])); !slices.Equal(keys, doc["notify.command"]) {
		t.Errorf("the README's example alert has\n  %s\nan alert has\n  %s", strings.Join(keys, ", "), strings.Join(doc["notify.command"], ", "))
	}
}
