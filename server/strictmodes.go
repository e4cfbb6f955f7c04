package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The server trusts two files: authorized_keys says who may log in and
// who may spend money, and the host key proves the server to its users.
// Whoever can write either of them (or replace it through its directory)
// can grant themselves a booker session or pose as the server, so, like
// OpenSSH's StrictModes, a file that someone other than the server's user
// (or root) could change is refused, never read.

// maxTrustedFile bounds what readTrusted reads: an authorized_keys file of
// a thousand keys is well under it, and a huge file is not read into
// memory at every login.
const maxTrustedFile = 4 << 20

// UnsafeFileError is a trusted file (authorized_keys, host key) that
// someone other than the server's user could change, or whose secret
// others could read. It names the file, the reason and the fix.
type UnsafeFileError struct {
	// Path is the file or directory at fault.
	Path string
	// Why says what is wrong ("is writable by its group and others").
	Why string
	// Fix is the command that fixes it ("chmod go-w /path").
	Fix string
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("%s %s; gpumarket refuses it, as OpenSSH's StrictModes does (fix: %s)", e.Path, e.Why, e.Fix)
}

// readTrusted reads a trusted file after checking that nobody but the
// server's user or root can change it: the file is opened first and its
// checks run on the open file, so a swap between check and read cannot
// slip in another file. secret also refuses a file others can read (a
// private key). Errors of the checks are *UnsafeFileError.
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

// checkTrustedFile checks the file itself: a regular file, owned by the
// server's user or root, writable by nobody else, and for a secret
// readable by nobody else.
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

// checkTrustedDirs checks every directory above the file, to the root:
// whoever may write a directory may rename the file away and put their
// own in its place. A sticky directory (/tmp, mode 1777) is allowed where
// OpenSSH would stop at the user's home instead: the sticky bit lets only
// an entry's owner rename or remove it, so others cannot swap ours. Both
// the path as written and the path its symbolic links lead to are checked.
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

// checkOwner refuses a file or directory owned by someone other than the
// server's user or root. Where the system has no owners to read, there is
// nothing to check.
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

// isUnsafe reports whether err is a refusal of readTrusted's checks.
func isUnsafe(err error) bool {
	var ue *UnsafeFileError
	return errors.As(err, &ue)
}
