package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// listRows reads the ledger, failing the test when it cannot: a check
// that "nothing was written" must not pass because the read failed.
func listRows(t *testing.T, st *ledger.Store) []ledger.Entry {
	t.Helper()
	rows, err := st.List(context.Background())
	if err != nil {
		t.Fatalf("read the ledger: %v", err)
	}
	return rows
}

// noRows fails unless the ledger was read and holds no row.
func noRows(t *testing.T, st *ledger.Store) {
	t.Helper()
	if rows := listRows(t, st); len(rows) != 0 {
		t.Fatalf("rows written: %+v", rows)
	}
}

// within runs fn and fails the test if it does not return in time: a
// purchase re-sent into a hook that blocks must fail the test, not hang
// it until the package's timeout.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s (a re-sent call blocked?)", what, d)
	}
}
