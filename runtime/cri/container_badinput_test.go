package cri_test

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func TestContainerBadInput(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("bad")
	sb := e.RunPod(pod, "")

	create := func(sandbox string, cfg *runtimeapi.ContainerConfig) error {
		_, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandbox, Config: cfg, SandboxConfig: pod})
		return err
	}
	with := func(f func(c *runtimeapi.ContainerConfig)) *runtimeapi.ContainerConfig {
		c := runtimetest.ContainerConfig("ok", "true")
		f(c)
		return c
	}
	cases := []struct {
		name    string
		sandbox string
		cfg     *runtimeapi.ContainerConfig
		code    codes.Code
	}{
		{"no config", sb, nil, codes.InvalidArgument},
		{"slash in name", sb, with(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = "a/b" }), codes.InvalidArgument},
		{"dotdot in name", sb, with(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = ".." }), codes.InvalidArgument},
		{"huge name", sb, with(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = strings.Repeat("x", 1000) }), codes.InvalidArgument},
		{"escaping log path", sb, with(func(c *runtimeapi.ContainerConfig) { c.LogPath = "../../etc/x.log" }), codes.InvalidArgument},
		{"absolute log path", sb, with(func(c *runtimeapi.ContainerConfig) { c.LogPath = "/etc/x.log" }), codes.InvalidArgument},
		{"huge args", sb, with(func(c *runtimeapi.ContainerConfig) { c.Args = []string{strings.Repeat("a", 2<<20)} }), codes.InvalidArgument},
		{"relative mount", sb, with(func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "../x", HostPath: "/tmp"}}
		}), codes.InvalidArgument},
		{"unknown capability", sb, with(func(c *runtimeapi.ContainerConfig) {
			c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"CAP_BOGUS"}}
		}), codes.InvalidArgument},
		{"privileged in unprivileged pod", sb, with(func(c *runtimeapi.ContainerConfig) { c.Linux.SecurityContext.Privileged = true }), codes.InvalidArgument},
		{"run as group alone", sb, with(func(c *runtimeapi.ContainerConfig) {
			c.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 5}
		}), codes.InvalidArgument},
		{"unknown user", sb, with(func(c *runtimeapi.ContainerConfig) { c.Linux.SecurityContext.RunAsUsername = "nosuchuser" }), codes.FailedPrecondition},
		{"unknown sandbox", "0123abcd", runtimetest.ContainerConfig("ok", "true"), codes.NotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := create(c.sandbox, c.cfg); status.Code(err) != c.code {
				t.Fatalf("got %v, want %v", err, c.code)
			}
		})
	}
	// A failed create leaves nothing behind and frees the name.
	if list, _ := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{}); len(list.GetContainers()) != 0 {
		t.Fatalf("failed creates left containers: %v", list)
	}
	id := e.CreateContainer(sb, pod, runtimetest.ContainerConfig("ok", "true"))
	if err := create(sb, runtimetest.ContainerConfig("ok", "true")); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}

	for name, call := range map[string]func(id string) error{
		"start": func(id string) error {
			_, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id})
			return err
		},
		"status": func(id string) error {
			_, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err
		},
		"stats": func(id string) error {
			_, err := e.Runtime.ContainerStats(e.Ctx(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
			return err
		},
		"update": func(id string) error {
			_, err := e.Runtime.UpdateContainerResources(e.Ctx(), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id})
			return err
		},
		"reopen": func(id string) error {
			_, err := e.Runtime.ReopenContainerLog(e.Ctx(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
			return err
		},
	} {
		if err := call("feedface"); status.Code(err) != codes.NotFound {
			t.Errorf("%s of an unknown id: %v", name, err)
		}
	}
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: "feedface"}); err != nil {
		t.Errorf("remove of an unknown id: %v", err)
	}
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: "feedface"}); err != nil {
		t.Errorf("stop of an unknown id: %v", err)
	}
	if _, err := e.Runtime.CheckpointContainer(e.Ctx(), &runtimeapi.CheckpointContainerRequest{ContainerId: id}); status.Code(err) != codes.Unimplemented {
		t.Errorf("checkpoint: %v", err)
	}
	// A created container cannot be started twice; reopening the log of a stopped one fails cleanly.
	if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	e.WaitContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second start: %v", err)
	}
	if _, err := e.Runtime.ReopenContainerLog(e.Ctx(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("reopen of an exited container: %v", err)
	}
}

func TestContainerFiltersAndReopenLog(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("filters")
	sb := e.RunPod(pod, "")
	a := e.RunContainer(sb, pod, runtimetest.ContainerConfig("a", "sh", "-c", "while :; do echo a; sleep 0.05; done"))
	b := e.CreateContainer(sb, pod, runtimetest.ContainerConfig("b", "true"))
	list := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		r, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range r.Containers {
			ids = append(ids, c.Id)
		}
		return ids
	}
	for name, tc := range map[string]struct {
		f    *runtimeapi.ContainerFilter
		want []string
	}{
		"id prefix": {&runtimeapi.ContainerFilter{Id: a[:8]}, []string{a}},
		"state":     {&runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}}, []string{b}},
		"sandbox":   {&runtimeapi.ContainerFilter{PodSandboxId: sb}, nil},
		"labels":    {&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"container": "b"}}, []string{b}},
		"no match":  {&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"container": "zzz"}}, []string{}},
		"other pod": {&runtimeapi.ContainerFilter{PodSandboxId: "ffff"}, []string{}},
	} {
		got := list(tc.f)
		if tc.want == nil {
			if len(got) != 2 {
				t.Errorf("%s: %v", name, got)
			}
			continue
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v want %v", name, got, tc.want)
		}
	}

	// Rotate the log as the kubelet does: rename, then ask for a reopen; new lines go to a new file.
	logPath := e.Status(a).LogPath
	e.WaitLog(logPath, "stdout F a")
	if err := renameFile(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Runtime.ReopenContainerLog(e.Ctx(), &runtimeapi.ReopenContainerLogRequest{ContainerId: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logPath); err != nil {
		t.Fatalf("no new log file when ReopenContainerLog returned: %v", err)
	}
	e.WaitLog(logPath, "stdout F a")
}

func renameFile(from, to string) error { return os.Rename(from, to) }

// TestContainerStartFailure: a command that does not exist fails the create or the start with a
// clear error; a container whose start failed is EXITED with the reason, and removable.
func TestContainerStartFailure(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("startfail-" + handler)
			sb := e.RunPod(pod, handler)
			resp, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{
				PodSandboxId: sb, Config: runtimetest.ContainerConfig("missing", "/no/such/binary"), SandboxConfig: pod})
			if err != nil {
				return // refused at create: nothing more to check
			}
			if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err == nil {
				st := e.WaitContainerState(resp.ContainerId, runtimeapi.ContainerState_CONTAINER_EXITED)
				if st.ExitCode == 0 {
					t.Fatalf("a missing binary ran: %+v", st)
				}
			} else {
				st := e.Status(resp.ContainerId)
				if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" || st.Message == "" {
					t.Fatalf("after a failed start: %+v", st)
				}
			}
			if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: resp.ContainerId}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
