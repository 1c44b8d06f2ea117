// Package unixsock listens on and dials unix sockets whose paths may exceed the 108 bytes of a
// socket address: agents' root directories (a test's temporary folder, a deep --root-dir) make
// paths such as <root>/device-plugins/kubelet.sock longer than that. A long path is reached
// through /proc/self/fd/N/<name>, N an O_PATH descriptor of its folder.
package unixsock

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxPath leaves room below the kernel's 108 bytes for the terminating NUL.
const maxPath = 100

// Listen makes a stream socket at path. The listener never removes it on Close: the name it was
// bound under may have been a descriptor's, gone by then; the caller removes path itself.
func Listen(path string) (net.Listener, error) {
	var l net.Listener
	err := at(path, func(name string) error {
		var err error
		l, err = net.Listen("unix", name)
		return err
	})
	if err != nil {
		return nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return l, nil
}

// Dial connects to the stream socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := at(path, func(name string) error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, "unix", name)
		return err
	})
	return c, err
}

// at runs f with a name for path short enough for a socket address.
func at(path string, f func(name string) error) error {
	if len(path) < maxPath {
		return f(path)
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open folder of %s: %w", path, err)
	}
	defer unix.Close(dir)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(path)))
}
