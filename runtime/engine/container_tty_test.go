package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExecTTYAndContainerAttach(t *testing.T) {
	for _, handler := range []string{"runc", "crun", "runsc"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("tty-" + handler)
			sb := e.RunPod(pod, handler)
			id := e.RunContainer(sb, pod, runtimetest.ContainerConfig("target", "sleep", "1000"))

			out := &syncBuffer{}
			resize := make(chan oci.TermSize, 1)
			resize <- oci.TermSize{Width: 123, Height: 45}
			close(resize)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			script := `for i in $(seq 100); do s=$(busybox stty size); [ "$s" = "45 123" ] && break; sleep 0.05; done; echo "size $s"; busybox tty; exit 3`
			code, err := e.Engine.ExecInContainer(ctx, id, []string{"sh", "-c", script}, engine.ExecIO{Stdout: out, Tty: true, Resize: resize})
			if err != nil || code != 3 {
				t.Fatalf("exec tty: code %d err %v out %q", code, err, out.String())
			}
			// gVisor hands the outer terminal to the process as a host fd: sized, but not a pts.
			if !strings.Contains(out.String(), "size 45 123") || handler != "runsc" && !strings.Contains(out.String(), "/dev/pts/") {
				t.Fatalf("tty output: %q", out.String())
			}

			// A tty container logs its terminal's output.
			tcfg := runtimetest.ContainerConfig("ttyctr", "sh", "-c", "busybox tty; echo END")
			tcfg.Tty = true
			tid := e.RunContainer(sb, pod, tcfg)
			st := e.WaitContainerState(tid, runtimeapi.ContainerState_CONTAINER_EXITED)
			if log := e.WaitLog(st.LogPath, "END"); !strings.Contains(log, "stdout") {
				t.Fatalf("tty log: %s", log)
			}

			// Attach to a container reading stdin: what is written comes back on stdout.
			icfg := runtimetest.ContainerConfig("cat", "cat")
			icfg.Stdin = true
			iid := e.RunContainer(sb, pod, icfg)
			target, err := e.Engine.ContainerAttachTarget(iid)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := target.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("hello attach\n")); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			buf := make([]byte, 8193)
			n, err := conn.Read(buf)
			if err != nil || n < 2 || buf[0] != 2 || string(buf[1:n]) != "hello attach\n" {
				t.Fatalf("attach read: %q %v", buf[:n], err)
			}
			e.WaitLog(e.Status(iid).LogPath, "stdout F hello attach")
		})
	}
}
