package present

// Col is one column of a table, declared once for the TUI and every CLI
// output format.
type Col[R any] struct {
	// The TUI's: MaxWidth is how far it grows, Prio 0 stays longest.
	Title                 string
	Width, MaxWidth, Prio int
	Right                 bool
	Cell                  func(R) string

	// The CLI's: Field is the JSON key (DESIGN.md's contract); Format is
	// the table's ("%.2f", "local", "-": not in it); a nil or NaN Value is
	// unknown. Head and Text replace the table's upper-cased Field and
	// formatted Value.
	Field, Format string
	TableOnly     bool
	Value         func(R) any
	Head          string
	Text          func(R) string
}
