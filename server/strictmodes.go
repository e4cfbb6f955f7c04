package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxTrustedFile keeps a huge file out of memory at every login.
const maxTrustedFile = 4 << 20

// UnsafeFileError is a trusted file others could change (or read, a secret), with the fix.
type UnsafeFileError struct {
	Path string
	Why  string
	Fix  string
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("%s %s; gpumarket refuses it, as OpenSSH's StrictModes does (fix: %s)", e.Path, e.Why, e.Fix)
}

// readTrusted reads a file only nobody but us or root can change, checking the
// open file so no swap slips in; secret also refuses one others can read.
func readTrusted(path string, secret bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkTrustedFile(path, fi, secret); err != nil {
		return nil, err
	}
	if err := checkTrustedDirs(path); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTrustedFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTrustedFile {
		return nil, fmt.Errorf("%s is larger than %d MiB; want an authorized_keys or key file", path, maxTrustedFile>>20)
	}
	return data, nil
}

func checkTrustedFile(path string, fi fs.FileInfo, secret bool) error {
	if !fi.Mode().IsRegular() {
		return &UnsafeFileError{Path: path, Why: "is not a regular file", Fix: "point the setting at a regular file"}
	}
	if err := checkOwner(path, fi); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is writable by %s (mode %04o)", whoWrites(perm), perm),
			Fix: "chmod go-w " + path + ", then check that it holds only the keys you listed"}
	}
	if secret && perm&0o077 != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is a private key readable by others (mode %04o)", perm),
			Fix: "chmod 600 " + path}
	}
	return nil
}

// checkTrustedDirs checks every directory above the file, as written and as
// its links resolve; a sticky one lets no one else swap our entry.
func checkTrustedDirs(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	paths := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				return fmt.Errorf("check directory %s: %w", dir, err)
			}
			if err := checkOwner(dir, fi); err != nil {
				return err
			}
			if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
				return &UnsafeFileError{Path: dir, Why: fmt.Sprintf("(a directory above %s) is writable by %s (mode %04o), who could replace the file", path, whoWrites(perm), perm),
					Fix: "chmod go-w " + dir}
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	return nil
}

// checkOwner refuses an owner other than us or root, where owners exist.
func checkOwner(path string, fi fs.FileInfo) error {
	uid, ok := fileOwner(fi)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); uid != me && uid != 0 {
		return &UnsafeFileError{Path: path, Why: fmt.Sprintf("is owned by user %d, not by the server's user (%d) or root", uid, me),
			Fix: fmt.Sprintf("chown %d %s (or use a file of your own)", me, path)}
	}
	return nil
}

func whoWrites(perm fs.FileMode) string {
	switch {
	case perm&0o022 == 0o022:
		return "its group and others"
	case perm&0o002 != 0:
		return "others"
	}
	return "its group"
}

func isUnsafe(err error) bool {
	var ue *UnsafeFileError
	return errors.As(err, &ue)
}
