package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestContainerHybridWrapper(t *testing.T) {
	if NeedsHybridWrapper("/usr/bin/runc") {
		t.Fatal("runc never needs the wrapper")
	}
	dir := t.TempDir()
	p, err := HybridWrapper(dir, "/usr/bin/crun")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode()&0o100 == 0 || filepath.Dir(p) != dir {
		t.Fatalf("wrapper %s: %v %v", p, st, err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "'/usr/bin/crun'") || !strings.Contains(string(b), "--make-rprivate /sys/fs/cgroup") {
		t.Fatalf("wrapper:\n%s", b)
	}
	if p2, err := HybridWrapper(dir, "/usr/bin/crun"); err != nil || p2 != p {
		t.Fatalf("second call: %s %v", p2, err)
	}
	if _, err := HybridWrapper(dir, "/bin/it's"); err == nil {
		t.Fatal("a path that cannot be quoted was accepted")
	}
}
