package tui

// tableColumn is one column of the Ledger or Blocks table.
type tableColumn struct {
	title string
	w     int
	right bool
	prio  int // lower stays longer as the terminal narrows
	// max, when above w, is how wide the column grows into cells the
	// kept columns leave over (place names run long).
	max int
}

// fitTable keeps the columns that fit in w cells (one space between
// them), by priority, in display order, and gives the cells left over to
// the columns that grow.
func fitTableOld(cols []tableColumn, w int) []tableColumn {
	keep := make([]bool, len(cols))
	used, last := 0, 0
	for _, c := range cols {
		last = max(last, c.prio) // a list without some columns keeps the others' priorities
	}
	for p := range last + 1 {
		for i, c := range cols {
			if c.prio == p && used+c.w+1 <= w+1 {
				keep[i] = true
				used += c.w + 1
			}
		}
	}
	var out []tableColumn
	spare := w + 1 - used
	for i, c := range cols {
		if !keep[i] {
			continue
		}
		if add := min(spare, c.max-c.w); add > 0 {
			c.w += add
			spare -= add
		}
		out = append(out, c)
	}
	return out
}
