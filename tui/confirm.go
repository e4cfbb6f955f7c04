package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/gpumarket/gpumarket/domain"
)

// moneyAction is one money-spending action as the confirmation runs it: a
// view gives its lines, quote and send; the box does the rest.
type moneyAction struct {
	// title is the question, the total in it where there is one.
	title string
	// verb ends "Type y then enter to …": "buy", "launch", "delete it".
	verb string
	// lines are the terms, shown under the title.
	lines []string
	// checking and sending are what the box says while quote or send runs.
	checking, sending string
	// quote asks for the terms and the provider's dry run off the UI goroutine;
	// nil when there is nothing to ask.
	quote func(context.Context) quoteAnswer
	// send carries the action out once confirmed. Its context outlives the
	// session: once sent, an action runs to its recorded answer.
	send func(context.Context) outcome
	// notes are the view's remarks under the terms; they survive a renewal.
	notes []string
}

// quoteAnswer is what an action's quote found.
type quoteAnswer struct {
	// lines go before the action's own (a fleet's estimate, its cost first).
	lines []string
	// dryRun is the provider's dry-run answer, without a "dry run:" lead.
	dryRun string
	// err is why the action cannot go ahead: the box then only closes.
	err error
	// send, when set, replaces the action's send with one bound to the quote.
	send func(context.Context) outcome
	// renewed is the action on the provider's current terms, to ask again.
	renewed *moneyAction
}

// outcome is a sent action's answer.
type outcome struct {
	// notice is what the footer says when err is nil.
	notice string
	// err is shown in the footer instead.
	err error
	// then goes to the owning view after the box closes, whatever the answer.
	then tea.Msg
	// renewed: the provider refused the shown terms (nothing spent); ask again.
	renewed *moneyAction
}

// Messages of the confirmation, routed to the view that owns it.
type (
	quotedMsg struct {
		seq int
		ans quoteAnswer
	}
	sentMsg struct {
		seq int
		out outcome
	}
)

// confirmation is the box every money-spending action passes: only y then
// enter sends. A view passes every message through its update first.
type confirmation struct {
	c     *common
	ctx   context.Context
	owner *owner
	// spends is false when the session has no booking service.
	spends bool

	open bool
	// act is the action shown; lines its terms with what its quote added.
	act   moneyAction
	lines []string
	// busy is set while the quote or the send runs.
	busy string
	// problem is why the action cannot go ahead: only esc is accepted.
	problem string
	dryRun  string
	typed   string
	// sending: once sent it cannot be cancelled, so keys are ignored.
	sending bool
	// seq tells the answers of this box's latest step from older ones.
	seq int

	// w, h are the box's cells; terms that do not fit scroll from top. y is
	// taken only once every term line has been on screen (seen).
	w, h      int
	top, seen int
}

// refuse is the answer to a money key when this session may not spend (a
// viewer) or cannot (no ledger); nil when it may go on.
func (f *confirmation) refuse() tea.Cmd {
	switch {
	case f.c.role == RoleViewer:
		return notifyErr(errors.New("read-only session: booking, launching and deleting are disabled here; nothing was spent"))
	case !f.spends:
		return notifyErr(errors.New("booking is not available in this session (no ledger); nothing was spent"))
	}
	return nil
}

// offer opens the box for the action build makes; refuse is asked first so
// a viewer hears why whatever is selected.
func (f *confirmation) offer(build func() (*moneyAction, tea.Cmd)) tea.Cmd {
	if cmd := f.refuse(); cmd != nil {
		return cmd
	}
	a, why := build()
	if a == nil {
		return why
	}
	return f.start(*a)
}

// start opens the box for a and asks for its quote.
func (f *confirmation) start(a moneyAction) tea.Cmd {
	f.close()
	f.open, f.act = true, a
	f.lines = append(append([]string(nil), a.lines...), a.notes...)
	f.seq++
	f.look()
	if a.quote == nil {
		return nil
	}
	f.busy = a.checking
	seq, ctx, quote := f.seq, f.ctx, a.quote
	return f.owner.task(func() tea.Msg { return quotedMsg{seq: seq, ans: quote(ctx)} })
}

// close shuts the box; answers still on their way are dropped.
func (f *confirmation) close() {
	*f = confirmation{c: f.c, ctx: f.ctx, owner: f.owner, spends: f.spends, seq: f.seq, w: f.w, h: f.h}
}

// renew shows a, the action on the provider's current terms, and asks again
// from the start: nothing is sent on terms the box did not show.
func (f *confirmation) renew(a moneyAction) tea.Cmd {
	if a.notes == nil {
		a.notes = f.act.notes
	}
	return f.start(a)
}

// update takes the box's messages and, while open, the keys; it returns
// what is left for the view (another message or a follow-up).
func (f *confirmation) update(msg tea.Msg) (tea.Msg, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		if f.open {
			return nil, f.key(msg)
		}
	case quotedMsg:
		if msg.seq != f.seq || !f.open {
			return nil, nil
		}
		f.busy = ""
		if msg.ans.renewed != nil {
			return nil, f.renew(*msg.ans.renewed)
		}
		f.lines = append(append([]string(nil), msg.ans.lines...), f.lines...)
		// New terms are read from the top again before a yes.
		f.top, f.seen, f.typed = 0, 0, ""
		if msg.ans.err != nil {
			f.problem = msg.ans.err.Error() // enter sends only without one
		}
		f.dryRun = msg.ans.dryRun
		if msg.ans.send != nil {
			f.act.send = msg.ans.send
		}
		f.look()
		return nil, nil
	case sentMsg:
		if msg.seq != f.seq {
			return nil, nil
		}
		if msg.out.renewed != nil {
			return nil, f.renew(*msg.out.renewed)
		}
		f.close()
		switch {
		case msg.out.err != nil:
			return msg.out.then, notifyErr(msg.out.err)
		case msg.out.notice != "":
			return msg.out.then, notify(msg.out.notice)
		}
		return msg.out.then, nil
	}
	return msg, nil
}

func (f *confirmation) key(msg tea.KeyPressMsg) tea.Cmd {
	if f.sending {
		return nil
	}
	switch msg.String() {
	case "esc", "n", "N", "q":
		f.close()
	case "down", "j":
		f.scroll(1)
	case "up", "k":
		f.scroll(-1)
	case "pgdown", "space":
		f.scroll(max(f.layout(&f.c.styles, f.w, f.h).room-2, 1))
	case "pgup":
		f.scroll(-max(f.layout(&f.c.styles, f.w, f.h).room-2, 1))
	case "y", "Y":
		if f.busy == "" && f.problem == "" && f.allSeen() {
			f.typed = "y"
		}
	case "backspace":
		f.typed = ""
	case "enter":
		if f.typed == "y" && f.busy == "" && f.problem == "" && f.act.send != nil && f.allSeen() {
			f.busy, f.sending, f.typed = f.act.sending, true, ""
			f.seq++
			seq, ctx, send := f.seq, context.WithoutCancel(f.ctx), f.act.send
			return f.owner.task(func() tea.Msg { return sentMsg{seq: seq, out: send(ctx)} })
		}
	default:
		f.typed = ""
	}
	return nil
}

// dryRunAnswer drops the provider's "dry run:" lead; the box writes one.
func dryRunAnswer(msg string) string { return domain.DryRunAnswer(msg, "") }

// keys are the footer's while the box is open: it takes every key.
func (f *confirmation) keys() keyMap {
	cancel := key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n/esc", "cancel"))
	l := f.layout(&f.c.styles, f.w, f.h)
	scroll := key.NewBinding(key.WithKeys("up", "down", "pgup", "pgdown"), key.WithHelp("↑/↓/pgdn", "terms"))
	scroll.SetEnabled(len(l.terms) > l.room)
	switch {
	case f.sending:
		return keyMap{} // it can no longer be cancelled; its answer comes
	case f.busy != "":
		return keyList(cancel)
	case f.problem != "":
		return keyList(scroll, key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close")))
	case !f.allSeen():
		return keyList(scroll, cancel)
	}
	return keyList(key.NewBinding(key.WithKeys("y"), key.WithHelp("y then enter", f.act.verb)), cancel, scroll)
}

// setSize: what a taller or wider terminal shows counts as seen.
func (f *confirmation) setSize(w, h int) {
	f.w, f.h = w, h
	if f.open {
		f.look()
	}
}

// scroll moves the terms by n lines and counts what comes on screen.
func (f *confirmation) scroll(n int) {
	l := f.layout(&f.c.styles, f.w, f.h)
	from, _, _, _ := termsWindow(len(l.terms), l.room, f.top+n)
	f.top = from
	f.look()
}

// look counts the term lines on screen as seen.
func (f *confirmation) look() {
	l := f.layout(&f.c.styles, f.w, f.h)
	from, to, _, _ := termsWindow(len(l.terms), l.room, f.top)
	f.top = from
	if from <= f.seen {
		f.seen = max(f.seen, to)
	}
}

func (f *confirmation) allSeen() bool {
	return f.seen >= len(f.layout(&f.c.styles, f.w, f.h).terms)
}

// boxLayout is the box cut into what it shows; room is the terms' lines.
type boxLayout struct {
	head  string
	terms []string
	tail  string
	room  int
}

func (f *confirmation) layout(st *styles, w, h int) boxLayout {
	// Lines wrap, never cut: the terms are read whole before the yes.
	wrap := func(l string) string {
		return "  " + strings.ReplaceAll(wordwrap(l, max(w-2, 1)), "\n", "\n  ")
	}
	var l boxLayout
	l.head = st.title.Render(wordwrap(f.act.title, max(w, 1)))
	for _, t := range f.lines {
		l.terms = append(l.terms, strings.Split(wrap(t), "\n")...)
	}
	if f.dryRun != "" {
		for _, t := range strings.Split(wrap("dry run: "+f.dryRun), "\n") {
			l.terms = append(l.terms, st.ok.Render(t))
		}
	}
	// The prompt takes two lines; a refusal takes its own.
	switch {
	case f.busy != "":
		l.tail = "\n  " + st.dim.Render(f.busy+"…")
	case f.problem != "":
		l.tail = "\n" + st.footerErr.Render(wrap(f.problem)) + "\n  " + st.dim.Render("esc closes; nothing was spent")
	}
	l.room = h - strings.Count(l.head, "\n") - 1 - max(strings.Count(l.tail, "\n")+1, 2)
	return l
}

// termsWindow is the part [from, to) of n term lines shown in room lines
// from top, with markers for the lines above and below.
func termsWindow(n, room, top int) (from, to int, above, below bool) {
	switch {
	case n <= room:
		return 0, n, false, false
	case room < 2:
		return 0, 0, false, room == 1 // a line to say so, if that
	}
	last := n - (room - 1) // the top that shows the end under one marker
	top = min(max(top, 0), last)
	switch {
	case top == 0:
		return 0, room - 1, false, true
	case top == last:
		return top, n, true, false
	case room >= 3:
		return top, top + room - 2, true, true
	}
	return top, top + 1, false, true
}

func (f *confirmation) view(st *styles, w, h int) string {
	l := f.layout(st, w, h)
	from, to, above, below := termsWindow(len(l.terms), l.room, f.top)
	var terms []string
	if above {
		terms = append(terms, "  "+st.dim.Render(fit(fmt.Sprintf("↑ %d more lines of terms above (↑ scrolls)", from), max(w-2, 1), false)))
	}
	terms = append(terms, l.terms[from:to]...)
	if below {
		terms = append(terms, "  "+st.dim.Render(fit(fmt.Sprintf("↓ %d more lines of terms (↓ or pgdn scrolls; a taller terminal shows them)", len(l.terms)-to), max(w-2, 1), false)))
	}
	tail := l.tail
	if tail == "" {
		answer := "[no]"
		if f.typed == "y" {
			answer = "[yes]"
		}
		switch {
		case l.room < 1 || (l.room < 2 && len(l.terms) > l.room):
			tail = "\n  " + st.dim.Render("Too small to show the terms: a taller terminal shows them · esc cancels")
		case !f.allSeen():
			tail = fmt.Sprintf("\n  Read every term (↓) before you %s · n or esc cancels    %s", f.act.verb, answer)
		default:
			tail = fmt.Sprintf("\n  Type y then enter to %s · n or esc cancels    %s", f.act.verb, answer)
		}
	}
	var s strings.Builder
	s.WriteString(l.head)
	s.WriteString("\n")
	for _, t := range terms {
		s.WriteString(t + "\n")
	}
	s.WriteString(tail)
	return s.String()
}
