package runtimetest

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// ContainerConfig is a minimal container running the busybox image with cmd (the image's sh
// when empty), logging to <name>.log.
func ContainerConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: Image},
		Command:  cmd,
		LogPath:  name + ".log",
		Labels:   map[string]string{"container": name},
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{}},
	}
}

// PodWithLogs is PodConfig with a log directory under the test's temp dir.
func (e *Env) PodWithLogs(name string) *runtimeapi.PodSandboxConfig {
	cfg := PodConfig(name)
	cfg.LogDirectory = filepath.Join(e.Dir, "logs", cfg.Metadata.Uid)
	return cfg
}

// CreateContainer creates cfg in the sandbox and fails the test if it cannot.
func (e *Env) CreateContainer(sandboxID string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	e.t.Helper()
	resp, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: cfg, SandboxConfig: pod,
	})
	if err != nil {
		e.t.Fatalf("CreateContainer %s: %v", cfg.GetMetadata().GetName(), err)
	}
	return resp.ContainerId
}

// RunContainer creates and starts cfg.
func (e *Env) RunContainer(sandboxID string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	e.t.Helper()
	id := e.CreateContainer(sandboxID, pod, cfg)
	if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		e.t.Fatalf("StartContainer %s: %v", cfg.GetMetadata().GetName(), err)
	}
	return id
}

// Status returns the container's status, failing the test on error.
func (e *Env) Status(id string) *runtimeapi.ContainerStatus {
	e.t.Helper()
	resp, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		e.t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return resp.Status
}

// WaitContainerState polls until the container reaches state; it fails the test after a minute,
// a bound for a hung test rather than a speed check.
func (e *Env) WaitContainerState(id string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := e.Status(id)
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("container %s: state %v, want %v", id, st.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitLog polls the file until it contains want and returns its content.
func (e *Env) WaitLog(path, want string) string {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("log %s never contained %q; it has:\n%s", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitListening polls, through ExecSync in the container, until a socket in its network namespace
// listens on port. A server a container starts is not listening when StartContainer returns, and
// a port-forward session ends at the first refused connection.
func (e *Env) WaitListening(id string, port int) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id,
			Cmd: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}, Timeout: 30})
		if err == nil && testutil.TCPListening(resp.Stdout, port) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("container %s: nothing listens on port %d: %v", id, port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
