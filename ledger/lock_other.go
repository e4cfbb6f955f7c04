//go:build !unix

package ledger

import "os"

// lockSupported: no file locks here; the heartbeat alone tells.
const lockSupported = false

func lockFile(path string) (*os.File, error) { return nil, nil }

func held(path string) bool { return false }

// writable reports whether this process may write path: it tries.
var writable = func(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !st.IsDir() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return false
		}
		f.Close()
		return true
	}
	f, err := os.CreateTemp(path, ".gpumarket-write-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return true
}
