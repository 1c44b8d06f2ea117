package cri_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func TestExecSync(t *testing.T) {
	for _, handler := range []string{"runc", "crun", "runsc"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("exec-" + handler)
			sb := e.RunPod(pod, handler)
			cfg := runtimetest.ContainerConfig("target", "tail", "-f", "/dev/null")
			cfg.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hello")}}
			id := e.RunContainer(sb, pod, cfg)

			r, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "echo $GREETING; echo oops >&2; exit 4"}})
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Stdout) != "hello\n" || string(r.Stderr) != "oops\n" || r.ExitCode != 4 {
				t.Fatalf("exec: %q %q %d", r.Stdout, r.Stderr, r.ExitCode)
			}

			_, err = e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sleep", "100"}, Timeout: 1})
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("timeout: %v", err)
			}
			// The timed-out process is gone, reaped (a zombie left to the container's init, which
			// need not reap, would still be listed).
			r, err = e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "ps -o comm | grep -cx sleep || true"}})
			if err != nil || strings.TrimSpace(string(r.Stdout)) != "0" {
				t.Fatalf("after timeout: %q %v", r.GetStdout(), err)
			}

			// 64 MiB of output: the reply holds the first 4 MiB.
			r, err = e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "dd if=/dev/zero bs=1M count=64 2>/dev/null; echo done >&2"}},
				grpc.MaxCallRecvMsgSize(16<<20)) // as the kubelet's CRI client allows
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Stdout) != 4<<20 || string(r.Stderr) != "done\n" || r.ExitCode != 0 {
				t.Fatalf("bounded output: %d bytes stdout, stderr %q, exit %d", len(r.Stdout), r.Stderr, r.ExitCode)
			}

			// A background child that keeps stdout open does not turn a finished exec into an error (runc,
			// a subreaper for its exec, returns when the child ends; others when the process does).
			r, err = e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "echo started; sleep 3 & exit 6"}})
			if err != nil || r.ExitCode != 6 || string(r.Stdout) != "started\n" {
				t.Fatalf("exec with a lingering child: %v %v", r, err)
			}
			if _, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: "ffffffff", Cmd: []string{"true"}}); status.Code(err) != codes.NotFound {
				t.Fatalf("unknown container: %v", err)
			}
			if _, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id}); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("empty command: %v", err)
			}
		})
	}
}
