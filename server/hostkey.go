package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	gossh "golang.org/x/crypto/ssh"
)

// HostKeyName is the host key's file name in the data dir.
const HostKeyName = "ssh_host_ed25519_key"

// LoadOrCreateHostKey reads the server's host key from path, creating an
// ed25519 key there (mode 0600, directory 0700) the first time. Keeping
// the key across restarts is what spares clients the "host key changed"
// warning.
func LoadOrCreateHostKey(path string, logger *slog.Logger) (gossh.Signer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = createHostKey(path)
		if err == nil {
			logger.Info("created SSH host key", "path", path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		logger.Warn("SSH host key is readable by others; chmod 600 it", "path", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	signer, err := gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("host key %s: want an unencrypted OpenSSH or PEM private key: %w", path, err)
	}
	return signer, nil
}

// createHostKey writes a new key with O_EXCL, so two servers starting at
// once cannot each write a different key; the loser reads the winner's.
func createHostKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create directory: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "gpumarket host key")
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	data := pem.EncodeToMemory(block)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("write: %w", err)
	}
	return data, nil
}
