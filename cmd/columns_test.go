package cmd

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/tui"
)

// TestAColumnDeclaredOnceShowsEverywhere: one column declared in present
// and listed in the Ledger view's and `ledger`'s columns is in the TUI's
// table and in the CLI's table, JSON and CSV, with nothing else changed.
func TestAColumnDeclaredOnceShowsEverywhere(t *testing.T) {
	col := &present.Col[*present.LedgerRow]{Title: "ECHO", Width: 12, Cell: echo, Field: "echo", Value: func(r *present.LedgerRow) any { return echo(r) }}
	view, cli := present.LedgerView, present.Ledger
	t.Cleanup(func() { present.LedgerView, present.Ledger = view, cli })
	present.LedgerView = append(slices.Clone(view), col)
	present.Ledger = append(slices.Clone(cli), col)

	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fake := ledgertest.New("sim").Simulated()
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Timeout: time.Second, Actor: "tester"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: domain.FleetSpec{Provider: "sim", Region: "us-east-1",
		InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := "echo-" + res.Row.ID[len(res.Row.ID)-4:]

	for format, in := range map[string]string{formatTable: "ECHO", formatJSON: `"echo":"` + want + `"`, formatCSV: ",echo\n"} {
		var b bytes.Buffer
		if err := writeRows(&b, format, []present.LedgerRow{present.NewLedgerRow(res.Row, time.Now())}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), in) || !strings.Contains(b.String(), want) {
			t.Errorf("-o %s lacks the column:\n%s", format, b.String())
		}
	}

	h := feed.New([]domain.Provider{fake}, feed.Options{})
	go h.Run(ctx)
	m := tui.New(tui.Options{Hub: h, Booking: svc, NoColor: true, Context: ctx})
	m.Update(tea.WindowSizeMsg{Width: 400, Height: 30})
	msgs := make(chan tea.Msg, 64)
	var send func(tea.Cmd)
	send = func(cmd tea.Cmd) {
		if cmd != nil {
			go func() {
				if msg := cmd(); msg != nil {
					msgs <- msg
				}
			}()
		}
	}
	send(m.Init())
	tabs, deadline := 0, time.After(10*time.Second)
	for !strings.Contains(ansi.Strip(m.View().Content), want) {
		select {
		case msg := <-msgs:
			if b, ok := msg.(tea.BatchMsg); ok {
				for _, c := range b {
					send(c)
				}
				continue
			}
			_, cmd := m.Update(msg)
			send(cmd)
		case <-time.After(50 * time.Millisecond):
			if tabs < 8 && !strings.Contains(ansi.Strip(m.View().Content), "LEDGER ID") {
				_, cmd := m.Update(tea.KeyPressMsg{Code: tea.KeyTab})
				send(cmd)
				tabs++
			}
		case <-deadline:
			t.Fatalf("no Ledger view with the row:\n%s", ansi.Strip(m.View().Content))
		}
	}
	if scr := ansi.Strip(m.View().Content); !strings.Contains(scr, "ECHO") || !strings.Contains(scr, want) {
		t.Errorf("the Ledger view lacks the column:\n%s", scr)
	}
}

func echo(r *present.LedgerRow) string { return "echo-" + r.ID[len(r.ID)-4:] }
