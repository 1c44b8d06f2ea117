package nsmgr

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func readSysctl(t *testing.T, key string) string {
	t.Helper()
	p, err := SysctlPath(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestSandboxNSPinRemove(t *testing.T) {
	testutil.Require(t)
	dir := t.TempDir()
	testutil.CheckNoLeaks(t, dir)
	m, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	hostPort := readSysctl(t, "net.ipv4.ip_unprivileged_port_start")
	hostShm := readSysctl(t, "kernel.shmmni")
	paths, err := m.Pin(Request{
		ID: "abc", Kinds: []Kind{Net, IPC, UTS}, Hostname: "pinned-host",
		Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "77", "kernel.shmmni": "1234"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{Net, IPC, UTS} {
		if !IsPinned(paths[k]) || paths[k] != m.Path(k, "abc") {
			t.Fatalf("%s not pinned at %s", k, paths[k])
		}
	}
	var hostname, port, shm string
	var loUp bool
	err = Do([]string{paths[Net], paths[IPC], paths[UTS]}, func() error {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		hostname = unix.ByteSliceToString(u.Nodename[:])
		port = readSysctl(t, "net.ipv4.ip_unprivileged_port_start")
		shm = readSysctl(t, "kernel.shmmni")
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, _ := unix.NewIfreq("lo")
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		loUp = ifr.Uint16()&unix.IFF_UP != 0
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if hostname != "pinned-host" || port != "77" || shm != "1234" || !loUp {
		t.Errorf("inside: hostname %q port %q shmmni %q lo up %v", hostname, port, shm, loUp)
	}
	if readSysctl(t, "net.ipv4.ip_unprivileged_port_start") != hostPort || readSysctl(t, "kernel.shmmni") != hostShm {
		t.Errorf("host sysctls changed")
	}
	if got, _ := m.List(); len(got["abc"]) != 3 {
		t.Errorf("List = %v", got)
	}
	for i := 0; i < 2; i++ {
		if err := m.Remove("abc"); err != nil {
			t.Fatalf("Remove #%d: %v", i, err)
		}
	}
	if got, _ := m.List(); len(got) != 0 {
		t.Errorf("after Remove, List = %v", got)
	}
}

func TestSandboxNSPinFailureLeavesNothing(t *testing.T) {
	testutil.Require(t)
	dir := t.TempDir()
	testutil.CheckNoLeaks(t, dir)
	m, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Pin(Request{ID: "abc", Kinds: []Kind{Net, UTS}, Sysctls: map[string]string{"net.no.such.sysctl": "1"}})
	if err == nil {
		t.Fatal("Pin with an unknown sysctl succeeded")
	}
	_, err = m.Pin(Request{ID: "abd", Kinds: []Kind{Net}, Inside: func() error { return os.ErrInvalid }})
	if err == nil {
		t.Fatal("Pin whose Inside failed succeeded")
	}
	if got, _ := m.List(); len(got) != 0 {
		t.Errorf("after failed Pin, List = %v", got)
	}
}

func TestSandboxSysctlPath(t *testing.T) {
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward", true},
		{"net.ipv4.conf.eth0/100.rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter", true},
		{"net..x", "", false},
		{"net./..x", "", false},
		{"net.//.x", "", false},
	} {
		got, err := SysctlPath(tc.key)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("SysctlPath(%q) = %q, %v", tc.key, got, err)
		}
	}
}

// TestPinFromUserns pins the namespaces of a process born in its own user namespace (with net
// and uts namespaces owned by it), sets them up from outside, and unpins them without leaks.
func TestPinFromUserns(t *testing.T) {
	testutil.Require(t, "sleep")
	dir := t.TempDir()
	testutil.CheckNoLeaks(t, dir)
	m, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testutil.LookPath("sleep"), "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 300000, Size: 1000}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 300000, Size: 1000}},
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	paths, err := m.PinFrom("uns", cmd.Process.Pid, []Kind{User, Net, UTS})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{User, Net, UTS} {
		if !IsPinned(paths[k]) {
			t.Errorf("%s not pinned after its process died", k)
		}
	}
	if err := Setup(paths, "uns-host", map[string]string{"net.ipv4.ip_unprivileged_port_start": "55"}); err != nil {
		t.Fatal(err)
	}
	err = Do([]string{paths[Net], paths[UTS]}, func() error {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		if h := unix.ByteSliceToString(u.Nodename[:]); h != "uns-host" {
			t.Errorf("hostname = %q", h)
		}
		if v := readSysctl(t, "net.ipv4.ip_unprivileged_port_start"); v != "55" {
			t.Errorf("sysctl = %q", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.List(); err != nil || len(got["uns"]) != 3 {
		t.Errorf("List = %v, %v", got, err)
	}
	if err := m.Remove("uns"); err != nil {
		t.Fatal(err)
	}
	if got, err := m.List(); err != nil || len(got) != 0 {
		t.Errorf("after Remove List = %v, %v", got, err)
	}
}

// TestNewMakesPinDirsPrivate: pins of an older version's 0711 dirs become reachable by root only.
func TestNewMakesPinDirsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns")
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]string{""}, kindDirs()...) {
		t.Run("/"+d, func(t *testing.T) {
			st, err := os.Stat(filepath.Join(dir, d))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != 0o700 {
				t.Errorf("mode %o, want 700", got)
			}
		})
	}
}
