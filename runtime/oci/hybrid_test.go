package oci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/internal/cgroupfs"
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

// A command started hiding the v2 hierarchy sees an empty controller list under an empty tmpfs,
// and the host keeps its own.
func TestStartHidingUnified(t *testing.T) {
	if len(cgroupfs.Host().HybridControllers()) == 0 {
		t.Skip("the host is not a hybrid cgroup host with v2 controllers: startHidingUnified is used only there")
	}
	hostBefore, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", "wc -c </sys/fs/cgroup/unified/cgroup.controllers; grep -c ' /sys/fs/cgroup/unified .* - tmpfs nodelet-no-cgroup2 ' /proc/self/mountinfo")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startHidingUnified(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got := strings.Fields(out.String()); len(got) != 2 || got[0] != "0" || got[1] != "1" {
		t.Errorf("inside: controllers bytes and hiding tmpfs mounts = %q, want 0 and 1", got)
	}
	hostAfter, _ := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if string(hostAfter) != string(hostBefore) || len(hostAfter) == 0 {
		t.Errorf("host controllers %q, were %q", hostAfter, hostBefore)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), "nodelet-no-cgroup2") {
		t.Error("the hiding tmpfs reached the daemon's mount namespace")
	}
}
