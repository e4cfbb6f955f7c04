package ledger

import (
	"context"
	"fmt"
)

// transaction is one money call over a recorded intent row.
type transaction struct {
	provider string
	noun     string // "purchase", "launch"
	subject  string // "purchase of X", "fleet launch"
	made     string // "bought", "launched"
	// cancelled is the row when ctx ended before the call: nothing was sent.
	cancelled func(Entry) Entry
	// call sends it; settle writes the answer into the row, ref names what it made.
	call func(ctx context.Context) (settle func(Entry) Entry, ref string, err error)
}

// transact sends a pending intent's call and records its outcome, even past ctx:
// a definite no fails the row; a lost answer leaves it unknown, never re-sent.
func (s *Service) transact(ctx context.Context, row Entry, t transaction) (Entry, error) {
	defer s.st.EndCall(row.ID)
	defer s.beat(ctx, row.ID)()
	wctx := context.WithoutCancel(ctx)
	if err := ctx.Err(); err != nil {
		out, uerr := s.update(wctx, t.cancelled(row))
		if uerr != nil {
			return out, fmt.Errorf("record cancelled %s %s: %w", t.noun, row.ID, uerr)
		}
		return out, fmt.Errorf("%s not sent: %w", t.subject, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	settle, ref, callErr := t.call(cctx)
	cancel()
	if callErr != nil {
		if s.declined(t.provider, callErr) {
			row.State, row.Error = StateFailed, callErr.Error()
			out, err := s.update(wctx, row)
			if err != nil {
				return out, fmt.Errorf("record failed %s %s: %w (%s error: %v)", t.noun, row.ID, err, t.noun, callErr)
			}
			return out, fmt.Errorf("%s declined by %s: %w", t.subject, t.provider, callErr)
		}
		row.State, row.Error = StateUnknown, "no answer: "+callErr.Error()
		out, err := s.update(wctx, row)
		if err != nil {
			return out, fmt.Errorf("record unknown %s %s: %w (%s error: %v)", t.noun, row.ID, err, t.noun, callErr)
		}
		s.opt.Logger.Warn(t.noun+" outcome unknown", "row", row.ID, "err", callErr)
		return out, &UnknownError{Row: out, Cause: callErr}
	}
	out, err := s.update(wctx, settle(row))
	if err != nil {
		return out, fmt.Errorf("record %s %s (%s: %s): %w", t.noun, row.ID, t.made, ref, err)
	}
	return out, nil
}
