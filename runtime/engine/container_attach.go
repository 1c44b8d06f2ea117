package engine

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
)

// AttachTarget is what attaching to a container's main process needs. conmon holds the process's
// stdio and serves it on Socket, a SOCK_SEQPACKET unix socket: each packet it sends starts with one
// byte naming the stream (2 stdout, 3 stderr) followed by the data; bytes written to it go to the
// process's stdin (when the container was created with stdin). Terminal sizes go through Resize.
type AttachTarget struct {
	ContainerID string
	Socket      string
	Tty         bool
	Stdin       bool
	StdinOnce   bool
	bundle      string
}

// Resize sets the container's terminal size (conmon applies it to the pty it holds).
func (a *AttachTarget) Resize(width, height uint16) error {
	return oci.Resize(a.bundle, height, width)
}

// Dial connects to the attach socket. Its path may be longer than a unix socket address allows
// (108 bytes), so the connection goes through /proc/self/fd and an open handle on the bundle dir.
func (a *AttachTarget) Dial() (*net.UnixConn, error) {
	dir, err := os.OpenFile(a.bundle, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	addr := &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), oci.AttachSocket), Net: "unixpacket"}
	return net.DialUnix("unixpacket", nil, addr)
}

// ContainerAttachTarget finds a running container's attach socket.
func (s *Engine) ContainerAttachTarget(containerID string) (*AttachTarget, error) {
	c, err := s.containers.Get(containerID)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", containerID, err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	return &AttachTarget{
		ContainerID: c.ID,
		Socket:      filepath.Join(c.Bundle, oci.AttachSocket),
		Tty:         c.Config.GetTty(),
		Stdin:       c.Config.GetStdin(),
		StdinOnce:   c.Config.GetStdinOnce(),
		bundle:      c.Bundle,
	}, nil
}
