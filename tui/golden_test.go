package tui

import (
	"fmt"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
)

// The golden screens are what a person sees, ANSI stripped. Regenerate
// with `go test ./tui -update` and read the diff before committing.

var goldenSizes = [][2]int{{120, 40}, {80, 24}}

func TestGoldenMarket(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "down", "space", "down", "down")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenMarketFiltered(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	press(m, "/", "h", "1", "0", "0", "enter")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}

func TestGoldenChart(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "enter")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenChartMarked(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "space", "space", "space", "enter", "w", "w")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenHelp(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	press(m, "?")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}
