package streaming

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
)

// newNetNS pins a fresh network namespace with lo up under dir, removed with the test.
func newNetNS(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "netns")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = lockedthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), p, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return loUp()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	})
	return p
}

func loUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}
