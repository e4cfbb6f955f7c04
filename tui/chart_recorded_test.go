package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// recordedProvider is a source whose cloud publishes no price history.
type recordedProvider struct{ recorded bool }

func (recordedProvider) Name() string { return "sim" }
func (p recordedProvider) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "sim", Cloud: domain.CloudGCP, CloudTitle: "Google Cloud", RecordedHistory: p.recorded}
}
func (recordedProvider) Fetch(context.Context, domain.FetchRequest, domain.Sink) error { return nil }

// The Chart says when a pool's history is only what gpumarket recorded,
// as the provider's descriptor says, and not otherwise.
func TestChartSaysHistoryIsRecorded(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		h := feed.New([]domain.Provider{recordedProvider{recorded}}, feed.Options{Query: domain.Query{Window: 24 * time.Hour}})
		m := newTestModel(t, 100, 30, Options{Hub: h})
		press(m, "enter")
		screen := ansi.Strip(m.View().Content)
		said := strings.Contains(screen, "Google Cloud publishes no spot price history: shown is what gpumarket recorded, since")
		if said != recorded {
			t.Errorf("recorded %v: said %v\n%s", recorded, said, screen)
		}
	}
}
