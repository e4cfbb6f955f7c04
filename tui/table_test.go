package tui

import (
	"testing"

	"github.com/gpumarket/gpumarket/present"
)

// TestFitTableAtItsEdge: columns fit with one space between them and none
// after the last; the column first to go is the least important, and the
// cells left over go to a column that grows, up to its most.
func TestFitTableAtItsEdge(t *testing.T) {
	cols := []*present.Col[int]{{Title: "A", Width: 5, Prio: 1}, {Title: "B", Width: 4, Prio: 0, MaxWidth: 6}, {Title: "C", Width: 3, Prio: 2}}
	for _, tc := range []struct {
		w    int
		want string
	}{
		{14, "A5 B4 C3"}, {13, "A5 B6"}, {11, "A5 B5"}, {10, "A5 B4"}, {9, "B5 C3"}, {4, "B4"}, {3, "C3"}, {2, ""},
	} {
		got := ""
		for _, c := range fitTable(cols, tc.w) {
			if got != "" {
				got += " "
			}
			got += c.Title + string(rune('0'+c.w))
		}
		if got != tc.want {
			t.Errorf("%d cells: %q, want %q", tc.w, got, tc.want)
		}
	}
}
