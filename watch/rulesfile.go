package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// RulesFileName is the data dir's file of rules made in the TUI, of the config's
// shape; the user's config file is never rewritten.
const RulesFileName = "watch-rules.yaml"

// maxRulesFile bounds the rules file as config.MaxFileSize would.
const maxRulesFile = 1 << 20

type fileStamp struct {
	exists bool
	mod    time.Time
	size   int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, fmt.Errorf("read rules file: %w", err)
	}
	return fileStamp{exists: true, mod: fi.ModTime(), size: fi.Size()}, nil
}

// readRulesFile reads and checks the rules file; a missing file has none.
func (e *Evaluator) readRulesFile() ([]Rule, fileStamp, error) {
	path := e.opt.RulesFile
	stamp, err := stampOf(path)
	if err != nil || !stamp.exists {
		return nil, stamp, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, stamp, fmt.Errorf("read rules file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRulesFile+1))
	f.Close()
	if err != nil {
		return nil, stamp, fmt.Errorf("read rules file: %w", err)
	}
	if len(data) > maxRulesFile {
		return nil, stamp, fmt.Errorf("%s: larger than %d MiB; want a rules file of a few KiB", path, maxRulesFile>>20)
	}
	ws, err := ParseRules(path, data, e.opt.Notify)
	if err != nil {
		return nil, stamp, err
	}
	inConfig := map[string]bool{}
	for _, r := range e.config {
		inConfig[r.Name] = true
	}
	out := make([]Rule, 0, len(ws))
	for i, w := range ws {
		if inConfig[w.Name] {
			return nil, stamp, Place(path, w, i, ruleErr("name", "%q names a rule of the config too; want a name of its own", w.Name))
		}
		if e.opt.Check != nil {
			if err := e.opt.Check(w); err != nil {
				return nil, stamp, Place(path, w, i, err)
			}
		}
		r := Compile(w, e.opt.Notify)
		r.From, r.File, r.Index = FromRulesFile, path, i
		out = append(out, r)
	}
	return out, stamp, nil
}

// reloadRulesFile rereads a changed rules file; one that no longer reads keeps the rules, said once.
func (e *Evaluator) reloadRulesFile() {
	if e.opt.RulesFile == "" {
		return
	}
	stamp, err := stampOf(e.opt.RulesFile)
	e.mu.Lock()
	same := err == nil && stamp == e.fileStamp
	e.mu.Unlock()
	if same {
		return
	}
	rules, stamp, err := e.readRulesFile()
	e.mu.Lock()
	e.fileStamp = stamp
	if err == nil {
		e.file = rules
	}
	e.mu.Unlock()
	if err != nil {
		e.log.Warn("watch: the rules file does not read; its rules stay as they were", "err", err)
		return
	}
	e.remarket()
}

// rewrite replaces the rules file's rules with what edit makes of them, under
// the state's write lock so concurrent rewrites lose no rule.
func (e *Evaluator) rewrite(ctx context.Context, edit func(current []Rule) ([]Rule, error)) error {
	return e.opt.State.locked(ctx, func() error {
		current, _, err := e.readRulesFile()
		if err != nil {
			return fmt.Errorf("the rules file has an error; fix it first: %w", err)
		}
		rules, err := edit(current)
		if err != nil {
			return err
		}
		data, err := MarshalRules(specsOf(rules))
		if err != nil {
			return err
		}
		path := e.opt.RulesFile
		tmp, err := os.CreateTemp(filepath.Dir(path), ".watch-rules-*.yaml")
		if err != nil {
			return fmt.Errorf("write rules file: %w", err)
		}
		defer os.Remove(tmp.Name())
		// A failed write must stop the rename: the old file holds every rule.
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			return fmt.Errorf("write rules file: %w", err)
		}
		stamp, err := stampOf(path)
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.file, e.fileStamp = rules, stamp
		e.mu.Unlock()
		return nil
	})
}

func specsOf(rules []Rule) []Spec {
	out := make([]Spec, len(rules))
	for i, r := range rules {
		out[i] = r.Spec
	}
	return out
}

// AddRule checks, saves and puts in force a rule made in the TUI, naming it from its kind if unnamed.
func (e *Evaluator) AddRule(ctx context.Context, w Spec) (Rule, error) {
	if e.opt.RulesFile == "" {
		return Rule{}, errors.New("rules cannot be saved in this run (no data dir)")
	}
	// Checked before naming: the probe shares w's conditions, so Validate's spelling reaches w.
	probe := w
	if probe.Name == "" {
		probe.Name = "new"
	}
	if err := probe.Validate("rule", e.opt.Notify); err != nil {
		return Rule{}, err
	}
	if e.opt.Check != nil {
		if err := e.opt.Check(w); err != nil {
			return Rule{}, err
		}
	}
	if x, ok := w.Cond.(expirer); ok {
		if err := x.expired(e.now()); err != nil {
			return Rule{}, err
		}
	}
	var added Rule
	err := e.rewrite(ctx, func(current []Rule) ([]Rule, error) {
		taken := map[string]bool{}
		for _, r := range append(e.rules(), current...) {
			taken[r.Name] = true
		}
		base := w.Name
		if base == "" {
			base = w.Kind()
		}
		w.Name = base
		for n := 2; taken[w.Name]; n++ {
			w.Name = base + "-" + strconv.Itoa(n)
		}
		if err := w.Validate("rule", e.opt.Notify); err != nil {
			return nil, err
		}
		added = Compile(w, e.opt.Notify)
		added.From, added.File, added.Index = FromRulesFile, e.opt.RulesFile, len(current)
		return append(current, added), nil
	})
	if err != nil {
		return Rule{}, err
	}
	e.log.Info("watch: rule made", "rule", added.Name, "by", added.MadeBy, "condition", added.Describe(), "file", e.opt.RulesFile)
	return added, nil
}

// RemoveRule deletes a rule of the rules file; the config's are the user's to edit.
func (e *Evaluator) RemoveRule(ctx context.Context, name string) error {
	for _, r := range e.rules() {
		if r.Name == name && r.From == FromConfig {
			return fmt.Errorf("rule %s is in the config file %s: edit it there", name, r.File)
		}
	}
	if e.opt.RulesFile == "" {
		return fmt.Errorf("no rule %s", name)
	}
	err := e.rewrite(ctx, func(current []Rule) ([]Rule, error) {
		var keep []Rule
		for _, r := range current {
			if r.Name != name {
				r.Index = len(keep)
				keep = append(keep, r)
			}
		}
		if len(keep) == len(current) {
			return nil, fmt.Errorf("no rule %s in %s", name, e.opt.RulesFile)
		}
		return keep, nil
	})
	if err == nil {
		e.mu.Lock()
		delete(e.rt, name)
		e.mu.Unlock()
	}
	return err
}
