package present

// Col is one column of a table, declared once for the TUI and every CLI
// output format: a column that only one of them shows leaves the other's
// fields empty.
type Col[R any] struct {
	// Title, Width, MaxWidth (how far it grows when there is room), Prio
	// (0 stays longest as the terminal narrows), Right and Cell are the
	// TUI's; "" Title keeps it out of the TUI.
	Title                 string
	Width, MaxWidth, Prio int
	Right                 bool
	Cell                  func(R) string

	// Field is the JSON key and CSV header (DESIGN.md's contract),
	// upper-cased in the CLI table; "" keeps it out of the CLI. Format
	// rounds it in the CLI table ("%.2f", "local" for a local time, "-"
	// to leave it out); TableOnly keeps it out of JSON and CSV. Value
	// nil, or a nil pointer, or NaN, is unknown.
	Field, Format string
	TableOnly     bool
	Value         func(R) any
	// Head and Text are the CLI table's header and cell where they are
	// not the upper-cased Field and the Value printed with Format.
	Head string
	Text func(R) string
}
