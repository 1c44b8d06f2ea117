package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/nodelet/nodelet/runtime/cni"
)

// dialTimeout bounds connecting to a port in the pod; a closed port answers at once.
const dialTimeout = 10 * time.Second

// PortForwardInNetNS connects to port on the pod's loopback, inside the network namespace pinned at
// netnsPath ("" for a host-network pod), and copies bytes both ways until either side is done.
// IPv4 is tried first, then IPv6, as servers listen on either.
func PortForwardInNetNS(ctx context.Context, netnsPath string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	conn, err := dialInNetNS(ctx, netnsPath, port)
	if err != nil {
		return err
	}
	return forward(ctx, conn, port, stream)
}

// PortForwardToPodIPs connects from the host's network namespace to port on the first of the pod's
// addresses that answers, and copies bytes both ways. It is for pods whose loopback the host
// cannot reach (gVisor keeps the pod's network stack, loopback included, in its own kernel):
// a server there listening on the pod's loopback only is not reachable.
func PortForwardToPodIPs(ctx context.Context, ips []string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	if len(ips) == 0 {
		return errors.New("the pod has no IP to forward to")
	}
	var errs []error
	for _, ip := range ips {
		d := net.Dialer{Timeout: dialTimeout}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err == nil {
			return forward(ctx, conn, port, stream)
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("connect to port %d of the pod: %w", port, errors.Join(errs...))
}

// forward copies between the stream and conn until either side is done; it closes conn.
func forward(ctx context.Context, conn net.Conn, port int32, stream io.ReadWriteCloser) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		// The client finished sending; let the server see EOF but keep reading its reply.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		errc <- err
	}()
	_, err := io.Copy(stream, conn)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("port-forward %d: %w", port, err)
	}
	return nil
}

func dialInNetNS(ctx context.Context, netnsPath string, port int32) (net.Conn, error) {
	dial := func() (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout}
		c, err4 := d.DialContext(ctx, "tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err4 == nil {
			return c, nil
		}
		c, err6 := d.DialContext(ctx, "tcp6", fmt.Sprintf("[::1]:%d", port))
		if err6 == nil {
			return c, nil
		}
		return nil, fmt.Errorf("connect to port %d in the pod: %w", port, err4)
	}
	if netnsPath == "" {
		return dial()
	}
	var conn net.Conn
	// The socket is made on a thread inside the pod's namespace and stays bound to it, so it can
	// be used from any goroutine afterwards.
	err := cni.InNetNS(netnsPath, func() error {
		var err error
		conn, err = dial()
		return err
	})
	return conn, err
}
