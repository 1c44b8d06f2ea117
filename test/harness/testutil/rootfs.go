package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// busyboxApplets are linked into test root filesystems; busybox-static runs them in-process.
var busyboxApplets = []string{
	"sh", "ls", "cat", "echo", "sleep", "true", "false", "id", "env", "hostname", "ps", "top",
	"mkdir", "rm", "touch", "wc", "grep", "head", "tail", "ip", "ping", "nc", "wget", "httpd",
	"kill", "pidof", "stat", "mount", "test", "printf", "yes", "dd", "seq", "date", "tee", "uname",
	"nslookup", "sysctl", "chmod", "chown", "ln", "readlink", "find", "du", "df", "whoami", "sed",
}

// BusyboxRootfs builds a minimal root filesystem from the host's static busybox in a temp dir
// and returns its path. The files belong to root and the dir is removed with the test.
func BusyboxRootfs(t testing.TB) string {
	t.Helper()
	Require(t, "busybox")
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := WriteBusyboxRootfs(dir); err != nil {
		t.Fatalf("busybox rootfs: %v", err)
	}
	return dir
}

// WriteBusyboxRootfs lays out a busybox-static root filesystem at dir.
func WriteBusyboxRootfs(dir string) error {
	src := LookPath("busybox")
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "tmp", "root", "var/log", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\ntester:x:1000:1000::/tmp:/bin/sh\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\ntester:x:1000:\nextra:x:2000:tester\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
