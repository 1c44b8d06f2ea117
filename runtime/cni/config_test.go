package cni

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func newConfManager(t *testing.T, confDir string, opts Options) *Manager {
	t.Helper()
	testutil.Require(t, "cni:bridge", "cni:host-local", "cni:portmap", "cni:bandwidth")
	opts.ConfDir = confDir
	opts.StateDir = filepath.Join(t.TempDir(), "state")
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// eventually polls cond: the watcher reacts asynchronously. The bound only keeps a broken
// watcher from hanging the test; it asserts nothing about speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDefaultNetworkWrittenIntoEmptyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d") // does not exist yet
	m := newConfManager(t, dir, Options{Default: DefaultNetwork{DataDir: "/nonexistent-unused"}})
	if err := m.Status(); err != nil {
		t.Fatalf("Status = %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, defaultConfName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"bridge": "nodelet0"`, `"subnet": "10.88.0.0/16"`, `"ipMasq": true`,
		`"type": "portmap"`, `"portMappings": true`, `"snat": true`, `"bandwidth": true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("default conflist lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), `"loopback"`) {
		t.Errorf("loopback is brought up by the manager, not the list:\n%s", b)
	}
}

func TestConfigSelectionAndStatus(t *testing.T) {
	good := func(name string) string { return string(DefaultNetwork{Name: name, Bridge: "nltsel0"}.ConfList()) }
	for _, tc := range []struct {
		name      string
		files     map[string]string
		noDefault bool
		wantNet   string // "" means Status must fail
		wantWhy   string
	}{
		{name: "first valid by name wins", files: map[string]string{"20-b.conflist": good("b"), "10-a.conflist": good("a")}, wantNet: "a"},
		{name: "invalid files are skipped", files: map[string]string{"01-broken.conflist": "{not json", "02-ok.conflist": good("ok")}, wantNet: "ok"},
		{name: "missing plugin binary is invalid", files: map[string]string{
			"01-x.conflist": `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"no-such-plugin"}]}`,
			"02-y.conflist": good("y")}, wantNet: "y"},
		{name: "single-plugin .conf is wrapped", files: map[string]string{
			"10-single.conf": `{"cniVersion":"1.0.0","name":"single","type":"bridge","bridge":"nltsel0","ipam":{"type":"host-local","subnet":"10.250.254.0/24"}}`},
			wantNet: "single"},
		{name: "only broken files: no default, reason reported", files: map[string]string{"10-broken.conflist": "{not json"},
			wantWhy: "10-broken.conflist"},
		{name: "empty dir without default", noDefault: true, wantWhy: "no CNI network config in "},
		{name: "unsupported cniVersion", files: map[string]string{
			"10-v.conflist": `{"cniVersion":"9.9.9","name":"v","plugins":[{"type":"bridge"}]}`}, wantWhy: "10-v.conflist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for f, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := newConfManager(t, dir, Options{NoDefault: tc.noDefault})
			err := m.Status()
			if tc.wantNet == "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantWhy) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
					t.Fatalf("Status = %v, want a FailedPrecondition mentioning %q", err, tc.wantWhy)
				}
				if strings.Contains(err.Error(), errdefs.ErrFailedPrecondition.Error()) {
					t.Errorf("the reason %q carries the sentinel's text", err)
				}
				if _, serr := os.Stat(filepath.Join(dir, defaultConfName)); serr == nil {
					t.Fatal("default network written although the dir had config files or defaults were off")
				}
				return
			}
			if err != nil {
				t.Fatalf("Status = %v", err)
			}
			list, _ := m.network(context.Background())
			if list.Name != tc.wantNet {
				t.Fatalf("network %q, want %q", list.Name, tc.wantNet)
			}
		})
	}
}

func TestConfDirChangesAreWatched(t *testing.T) {
	dir := t.TempDir()
	m := newConfManager(t, dir, Options{NoDefault: true})
	if m.Status() == nil {
		t.Fatal("ready without any config")
	}
	ready := func() bool { return m.Status() == nil }
	// Written the way admins' tools do: a temp file renamed into place.
	tmp := filepath.Join(dir, ".tmp")
	if err := os.WriteFile(tmp, DefaultNetwork{Name: "late", Bridge: "nltw0"}.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "50-late.conflist")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "network ready after a conflist appeared", ready)

	// A better-sorted file replaces it.
	if err := os.WriteFile(filepath.Join(dir, "10-early.conflist"), DefaultNetwork{Name: "early", Bridge: "nltw1"}.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "switch to 10-early.conflist", func() bool { return filepath.Base(m.ConfigFile()) == "10-early.conflist" })

	for _, f := range []string{"10-early.conflist", "50-late.conflist"} {
		os.Remove(filepath.Join(dir, f))
	}
	eventually(t, "not ready once the configs are gone", func() bool { return m.Status() != nil })
	if !strings.Contains(m.Status().Error(), "no CNI network config") {
		t.Fatalf("reason = %v", m.Status())
	}
	// The manager does not put its default back behind an admin's back.
	if _, err := os.Stat(filepath.Join(dir, defaultConfName)); err == nil {
		t.Fatal("default rewritten at runtime")
	}
}

// TestStatusFindsConfigWithoutTheWatcher: the conf dir is removed and made again, which the
// watcher cannot follow; Status still finds the config that appears in it.
func TestStatusFindsConfigWithoutTheWatcher(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newConfManager(t, dir, Options{NoDefault: true})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "not ready once the dir is gone", func() bool { return m.Status() != nil })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-back.conflist"), DefaultNetwork{Name: "back", Bridge: "nltb0"}.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready again", func() bool { return m.Status() == nil })
	// The watch is back on the new dir: a better-sorted file is picked up without Status.
	if err := os.WriteFile(filepath.Join(dir, "05-first.conflist"), DefaultNetwork{Name: "first", Bridge: "nltb1"}.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "watcher re-armed", func() bool { return filepath.Base(m.ConfigFile()) == "05-first.conflist" })
}
