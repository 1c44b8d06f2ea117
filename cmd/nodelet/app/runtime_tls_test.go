package app

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/runtime/streaming"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// writePair writes a server certificate and its key as PEM files and returns their paths.
func writePair(t *testing.T) (cert, key string) {
	t.Helper()
	c := testutil.NewCA(t, "streaming").Issue(t, "node", x509.ExtKeyUsageServerAuth)
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestRuntimeRefusesPlainStreamingBeyondLoopback starts `nodelet runtime` with a streaming
// address on the network and no TLS: it must stop before making anything, naming the flag.
func TestRuntimeRefusesPlainStreamingBeyondLoopback(t *testing.T) {
	cert, _ := writePair(t)
	tests := []struct {
		name string
		args []string
		want error
	}{
		{name: "all interfaces", args: []string{"--streaming-address", "0.0.0.0:10010"}, want: streaming.ErrPlainNonLoopback},
		{name: "port only", args: []string{"--streaming-address", ":10010"}, want: streaming.ErrPlainNonLoopback},
		{name: "node address", args: []string{"--streaming-address", "192.0.2.10:10010"}, want: streaming.ErrPlainNonLoopback},
		{name: "certificate without key", args: []string{"--streaming-address", "0.0.0.0:10010", "--streaming-tls-cert-file", cert}, want: errTLSPair},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldRoot, oldState := global.root, global.state
			global.root, global.state = t.TempDir(), t.TempDir()
			t.Cleanup(func() { global.root, global.state = oldRoot, oldState })
			sock := filepath.Join(t.TempDir(), "cri.sock")
			cmd := newRuntimeCmd()
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"--listen", "unix://" + sock}, tt.args...))
			err := cmd.ExecuteContext(context.Background())
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "--streaming-") {
				t.Fatalf("nodelet runtime %v: %v, want %v naming the flag", tt.args, err, tt.want)
			}
			if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the runtime started serving: %v", err)
			}
		})
	}
}

func TestStreamingTLSFlags(t *testing.T) {
	cert, key := writePair(t)
	tests := []struct {
		name      string
		addr      string
		files     tlsFiles
		wantTLS   bool
		wantError bool
	}{
		{name: "default loopback stays plain", addr: "127.0.0.1:0"},
		{name: "ipv6 loopback stays plain", addr: "[::1]:10010"},
		{name: "network with TLS", addr: "0.0.0.0:10010", files: tlsFiles{cert: cert, key: key}, wantTLS: true},
		{name: "loopback with TLS", addr: "127.0.0.1:0", files: tlsFiles{cert: cert, key: key}, wantTLS: true},
		{name: "network without TLS", addr: "0.0.0.0:10010", wantError: true},
		{name: "key without certificate", addr: "127.0.0.1:0", files: tlsFiles{key: key}, wantError: true},
		{name: "key is not the certificate's", addr: "0.0.0.0:10010", files: tlsFiles{cert: cert, key: cert}, wantError: true},
		{name: "missing files", addr: "0.0.0.0:10010", files: tlsFiles{cert: cert + ".nope", key: key}, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.files.config(tt.addr)
			if (err != nil) != tt.wantError || (c != nil) != tt.wantTLS {
				t.Fatalf("config(%q) = %v, %v; want TLS %v, error %v", tt.addr, c, err, tt.wantTLS, tt.wantError)
			}
		})
	}
}
