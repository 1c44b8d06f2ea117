package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// portLocks holds, for the life of the test process, the lock files of the ports it picked.
var portLocks struct {
	sync.Mutex
	held map[int]*os.File
}

// FreePort returns a TCP port of the host that nothing listens on, for a server a test starts
// later. Picking a port and binding it later is a race, so the port is chosen where the race
// cannot be lost to chance: below the kernel's ephemeral range (net.ipv4.ip_local_port_range),
// which the kernel hands out for listen(":0") and for the source ports of outgoing connections,
// so only an explicit bind can take it; and reserved by a lock on a file under the temp dir, held
// until the test process exits, so another test binary running beside this one never picks it.
func FreePort(t testing.TB) int {
	t.Helper()
	low, err := ephemeralLow()
	if err != nil {
		t.Fatal(err)
	}
	const first = 10000
	if low-first < 1000 {
		t.Fatalf("the kernel's ephemeral ports start at %d: too few ports below it for tests (sysctl net.ipv4.ip_local_port_range)", low)
	}
	dir := filepath.Join(os.TempDir(), "nodelet-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	portLocks.Lock()
	defer portLocks.Unlock()
	if portLocks.held == nil {
		portLocks.held = map[int]*os.File{}
	}
	for range 200 {
		port := first + rand.IntN(low-first)
		if portLocks.held[port] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		if !bindable(port) {
			f.Close()
			continue
		}
		portLocks.held[port] = f
		return port
	}
	t.Fatalf("no free TCP port in %d-%d after 200 tries", first, low-1)
	return 0
}

// bindable tells nothing listens on port, on any address.
func bindable(port int) bool {
	for _, addr := range []string{"0.0.0.0", "127.0.0.1", "[::]"} {
		l, err := net.Listen("tcp", addr+":"+strconv.Itoa(port))
		if err != nil {
			if addr == "[::]" && strings.Contains(err.Error(), "address family not supported") {
				continue
			}
			return false
		}
		l.Close()
	}
	return true
}

func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	return strconv.Atoi(fields[0])
}
