package cni

import (
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
)

// InNetNS runs fn on an OS thread that has joined the network namespace pinned at nsPath.
//
// The thread ends with the call (lockedthread) instead of going back to other goroutines while
// it sits in a foreign namespace. That costs a thread per call, which is cheap next to the bug
// it rules out.
func InNetNS(nsPath string, fn func() error) error {
	return lockedthread.Run(func() error {
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", nsPath, err)
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("join netns %s: %w", nsPath, err)
		}
		return fn()
	})
}

// IsNetNS tells whether path is a pinned network namespace (a bind mount of an nsfs inode), as
// opposed to a missing file or the empty file left behind once the namespace was unmounted.
func IsNetNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// loopbackUp brings up lo inside the current thread's network namespace. It is done here rather
// than through the loopback plugin: one ioctl instead of a fork and exec per pod.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for loopback: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// withStandInNetNS runs fn with the path of a throwaway network namespace that holds a veth
// interface ifName carrying addrs (CIDRs). TearDownPod uses it when the pod's own namespace is
// gone: the bridge plugin removes its masquerade rules only for the addresses it finds on the pod's
// interface, so without a stand-in those rules would outlive the pod.
//
// The namespace lives only as long as a locked thread that sits in it, so nothing is mounted and
// nothing can leak (the veth pair dies with it). It is a veth rather than a dummy because kernels
// without the dummy module exist (this machine's). The `ip` commands are forked from that thread
// and so run inside it.
func withStandInNetNS(ifName string, addrs []string, fn func(path string) error) error {
	type ready struct {
		path string
		err  error
	}
	readyc := make(chan ready, 1)
	done := make(chan struct{})
	lockedthread.Go(func() {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			readyc <- ready{err: fmt.Errorf("unshare stand-in netns: %w", err)}
			return
		}
		cmds := [][]string{{"link", "add", ifName, "type", "veth", "peer", "name", "standin0"}}
		for _, a := range addrs {
			cmds = append(cmds, []string{"addr", "add", a, "dev", ifName})
		}
		for _, args := range cmds {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				readyc <- ready{err: fmt.Errorf("ip %v in stand-in netns: %v: %s", args, err, out)}
				return
			}
		}
		readyc <- ready{path: fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())}
		<-done
	})
	r := <-readyc
	if r.err != nil {
		return r.err
	}
	defer close(done)
	return fn(r.path)
}
