package cni

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func TestSetPodCIDRRewritesOnlyOwnDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	m := newConfManager(t, dir, Options{Default: DefaultNetwork{Bridge: "nltcidr0", DataDir: "/nonexistent-unused"}})
	file := filepath.Join(dir, defaultConfName)
	read := func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	changed, err := m.SetPodCIDR("10.244.3.0/24,fd00:3::/64")
	if err != nil || !changed {
		t.Fatalf("SetPodCIDR = %v, %v; want a change", changed, err)
	}
	got := read()
	for _, want := range []string{`"subnet": "10.244.3.0/24"`, `"subnet": "fd00:3::/64"`, `"bridge": "nltcidr0"`, `"dst": "::/0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten conflist lacks %s:\n%s", want, got)
		}
	}
	eventually(t, "the rewritten network to load", func() bool { return m.Status() == nil })
	if changed, err := m.SetPodCIDR("10.244.3.0/24,fd00:3::/64"); err != nil || changed {
		t.Fatalf("the same CIDRs again: %v, %v; want no change", changed, err)
	}

	for _, bad := range []string{"", "10.244.3.0", "10.0.0.0/8,10.1.0.0/16", "nonsense/24"} {
		if _, err := m.SetPodCIDR(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SetPodCIDR(%q) = %v, want InvalidArgument", bad, err)
		}
	}

	// Edited by hand (here: one plugin removed): the admin's ranges stay.
	edited := strings.Replace(got, `"hairpinMode": true,`, ``, 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := m.SetPodCIDR("10.244.9.0/24"); err != nil || changed {
		t.Fatalf("an edited file: %v, %v; want it left alone", changed, err)
	}
	if read() != edited {
		t.Fatal("an edited default file was rewritten")
	}

	// Without the default file (an admin's network only) there is nothing to do.
	os.Remove(file)
	if changed, err := m.SetPodCIDR("10.244.9.0/24"); err != nil || changed {
		t.Fatalf("no default file: %v, %v", changed, err)
	}
}
