package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// The CLI's confirmation takes y as the TUI's does, and yes, in any case
// (issue 11.14: it wanted exactly "yes"); anything else cancels.
func TestConfirmTakesYOrYesInAnyCase(t *testing.T) {
	for _, c := range []struct {
		answer string
		yes    bool
	}{
		{"y\n", true}, {"Y\n", true}, {"yes\n", true}, {"YES\n", true}, {" Yes \n", true},
		{"n\n", false}, {"no\n", false}, {"\n", false}, {"yess\n", false}, {"y es\n", false}, {"ok\n", false},
	} {
		ptm, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal here: %v", err)
		}
		go func() {
			// The terminal echoes; drain what is written to it.
			b := make([]byte, 1024)
			for {
				if _, err := ptm.Read(b); err != nil {
					return
				}
			}
		}()
		if _, err := ptm.Write([]byte(c.answer)); err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		e := &env{stdin: tty, errOut: &errOut}
		err = e.confirm("book", "buy it for $10.00")
		tty.Close()
		ptm.Close()
		if (err == nil) != c.yes {
			t.Errorf("answer %q: err %v, want confirmed %v", c.answer, err, c.yes)
		}
		if !strings.HasPrefix(errOut.String(), "Type yes to buy it for $10.00 (y/yes") {
			t.Errorf("prompt %q", errOut.String())
		}
	}
}
