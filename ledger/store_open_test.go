package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// TestEmptyLedgerFileRefused: a ledger file that exists but is empty
// (truncated, a full disk, a bad restore) was taken for a new ledger and
// the same block bought again. It is refused, left as it is, and the
// message says how to rebuild.
func TestEmptyLedgerFileRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err == nil {
		s.Close()
		t.Fatal("an empty ledger file was opened as a new ledger")
	}
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "0 bytes") || !strings.Contains(err.Error(), "ledger --rebuild") {
		t.Fatalf("refusal %v: want ErrUnreadable naming the empty file and --rebuild", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("the refused file was changed: %v, %v", st, err)
	}
}

// TestForeignFileRefused: a file that is not SQLite, or SQLite without a
// ledger's tables, is not a ledger to migrate into.
func TestForeignFileRefused(t *testing.T) {
	for name, make := range map[string]func(path string) error{
		"text": func(p string) error { return os.WriteFile(p, []byte("id,kind\n1,block\n"), 0o600) },
		"sqlite of another program": func(p string) error {
			db, err := sql.Open("sqlite", "file:"+p)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(`CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')`)
			return err
		},
		"sqlite without tables": func(p string) error {
			db, err := sql.Open("sqlite", "file:"+p)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(`PRAGMA user_version = 7`)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := make(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatal("a foreign file was opened as a ledger")
			}
			if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "--rebuild") {
				t.Fatalf("refusal %v", err)
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Fatal("the refused file was changed")
			}
			// Set aside, a new ledger is made in its place.
			aside, err := SetAside(path, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			if err != nil || !strings.HasSuffix(aside, ".unreadable-20261201T090000Z") {
				t.Fatalf("set aside: %q, %v", aside, err)
			}
			if kept, _ := os.ReadFile(aside); string(kept) != string(before) {
				t.Fatal("the file set aside is not the refused one")
			}
			s, err = Open(dir)
			if err != nil {
				t.Fatalf("new ledger after setting aside: %v", err)
			}
			s.Close()
		})
	}
}

// TestNewLedgersAreWholeWhenFound: several processes opening a data dir
// with no ledger at once all get the same, complete one, and no file
// made aside on the way is left behind.
func TestNewLedgersAreWholeWhenFound(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	stores := make([]*Store, 6)
	errs := make([]error, 6)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(dir)
		}()
	}
	wg.Wait()
	ctx := context.Background()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	r, err := stores[0].RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StateScheduled}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if got, err := s.Get(ctx, r.ID); err != nil || got.IdemKey != "cb-1" {
			t.Fatalf("handle %d does not see the row: %v", i, err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, FileName+".new-*"))
	if len(names) != 0 {
		t.Fatalf("files left from making the ledger: %v", names)
	}
}

// v1Ledger writes a ledger of schema version 1 (before notes and owners)
// holding one deleted fleet whose delete note is in the error column.
func v1Ledger(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);` + migrations[0] + `;
		INSERT INTO migrations VALUES (1, '2026-11-01T00:00:00.000000000Z');
		INSERT INTO ledger (id, kind, provider, state, created_at, updated_at, error, idem_key)
			VALUES ('01A', 'fleet', 'aws', 'deleted', '2026-11-01T00:00:00.000000000Z', '2026-11-01T00:00:00.000000000Z', 'deleted by alice@host', '01A'),
			       ('01B', 'fleet', 'aws', 'failed', '2026-11-01T00:00:00.000000000Z', '2026-11-01T00:00:00.000000000Z', 'InsufficientInstanceCapacity', '01B');`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationMovesDeleteNotesOutOfError: an ordinary delete was written
// to the error column; the upgrade moves such notes to the note column
// and leaves real errors where they are.
func TestMigrationMovesDeleteNotesOutOfError(t *testing.T) {
	dir := t.TempDir()
	v1Ledger(t, dir)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	del, _ := s.Get(ctx, "01A")
	if del.Error != "" || del.Note != "deleted by alice@host" {
		t.Fatalf("deleted row: error %q note %q", del.Error, del.Note)
	}
	failed, _ := s.Get(ctx, "01B")
	if failed.Error != "InsufficientInstanceCapacity" || failed.Note != "" {
		t.Fatalf("failed row: error %q note %q", failed.Error, failed.Note)
	}
}

// TestReadOnlyStore: a store opened read-only lists, and refuses every
// write with ErrReadOnly; an older schema is read as it is.
func TestReadOnlyStore(t *testing.T) {
	dir := t.TempDir()
	v1Ledger(t, dir)
	s, err := OpenReadOnly(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rows, err := s.List(ctx)
	if err != nil || len(rows) != 2 || !s.ReadOnly() {
		t.Fatalf("list read-only: %d rows, %v", len(rows), err)
	}
	if _, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StatePending}, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("intent on a read-only store: %v", err)
	}
	if _, err := s.Update(ctx, rows[0]); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("update on a read-only store: %v", err)
	}
	if err := s.SaveOfferings(ctx, providersQuery(), nil, time.Now()); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("save offerings on a read-only store: %v", err)
	}
	// Read-only never migrates: the file is still version 1.
	var v int
	s.db.QueryRow(`SELECT MAX(version) FROM migrations`).Scan(&v)
	if v != 1 {
		t.Fatalf("schema version %d after a read-only open", v)
	}
}

// TestOpenReadOnlyDataDir: `ledger` could not read a ledger in a data
// dir it may not write (SQLite's WAL wants a -shm file beside it). Open
// sees the dir is not writable and opens read-only. The dir is made
// read-only for real: as root (who writes anywhere) the check runs in a
// child process as nobody.
func TestOpenReadOnlyDataDir(t *testing.T) {
	if dir := os.Getenv(readOnlyChildEnv); dir != "" {
		readOnlyChild(t, dir)
		return
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordIntent(context.Background(), Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StateScheduled}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, p := range []string{filepath.Dir(base), base} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(filepath.Join(dir, FileName), 0o644)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if os.Geteuid() != 0 {
		readOnlyChild(t, dir)
		return
	}
	// Copy the test binary where nobody may run it.
	bin := filepath.Join(base, "store.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestOpenReadOnlyDataDir$", "-test.v")
	cmd.Env = append(os.Environ(), readOnlyChildEnv+"="+dir)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "read-only ledger listed") {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
}

const readOnlyChildEnv = "GPUMARKET_STORE_READONLY_DIR"

func readOnlyChild(t *testing.T, dir string) {
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("open a read-only data dir: %v", err)
	}
	defer s.Close()
	rows, err := s.List(context.Background())
	if err != nil || len(rows) != 1 || !s.ReadOnly() {
		t.Fatalf("list: %d rows, %v, read-only %v", len(rows), err, s.ReadOnly())
	}
	if _, err := s.RecordIntent(context.Background(), Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-2", State: StatePending}, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write: %v", err)
	}
	t.Log("read-only ledger listed")
}

func providersQuery() domain.OfferingQuery { return domain.OfferingQuery{GPU: "H100"} }

// TestDamagedLedgerRefused: a ledger cut short or overwritten in part
// failed every command with SQLite's bare "database disk image is
// malformed (11)"; it is an unreadable ledger (ErrUnreadable, the way out
// named), read-write and read-only, and left as it was.
func TestDamagedLedgerRefused(t *testing.T) {
	src := t.TempDir()
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		r := Entry{Kind: KindBlock, Provider: "aws", IdemKey: fmt.Sprintf("cb-%d", i), State: StateScheduled,
			Request: []byte(`{"note":"` + strings.Repeat("x", 200) + `"}`)}
		if _, err := s.RecordIntent(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	whole, err := os.ReadFile(filepath.Join(src, FileName))
	if err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func([]byte) []byte{
		"cut in half":      func(b []byte) []byte { return b[:len(b)/2] },
		"last page gone":   func(b []byte) []byte { return b[:len(b)-4096] },
		"a page zeroed":    func(b []byte) []byte { c := append([]byte(nil), b...); clear(c[4096:8192]); return c },
		"header only left": func(b []byte) []byte { return b[:100] },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			bad := damage(whole)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			for how, open := range map[string]func() (*Store, error){
				"read-write": func() (*Store, error) { return Open(dir) },
				"read-only":  func() (*Store, error) { return OpenReadOnly(path) },
			} {
				s, err := open()
				if err == nil {
					s.Close()
					t.Fatalf("%s: a damaged ledger was opened", how)
				}
				if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "ledger --rebuild") {
					t.Fatalf("%s: refusal %v: want ErrUnreadable saying it is damaged and how to rebuild", how, err)
				}
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != string(bad) {
				t.Fatalf("the damaged ledger was changed: %v", err)
			}
		})
	}
	// The whole file still opens.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), whole, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatalf("the undamaged copy: %v", err)
	}
	s.Close()
}

// TestReadOnlyUnknownOfferingSaysWhy: on a data dir this user may not
// write, `offerings` warns that its search cannot be kept, and `book ID`
// then said only "unknown offering id: search again with `gpumarket
// offerings`" — which cannot help. The refusal says the ledger is
// read-only here, and what to do.
func TestReadOnlyUnknownOfferingSaysWhy(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	s, err := OpenReadOnly(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Offering(context.Background(), "cb-0123", time.Now())
	if !errors.Is(err, ErrOfferingUnknown) || !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("unknown offering on a read-only ledger: %v", err)
	}
	if strings.Contains(err.Error(), "search again") {
		t.Fatalf("tells to search again, which cannot help: %v", err)
	}
}
