package cri_test

import (
	"fmt"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestContainerConcurrentLifecycle runs pods side by side, each through create, start, exec,
// stop and remove, while other calls list and read stats, as a kubelet's pod workers and its
// housekeeping do at once.
func TestContainerConcurrentLifecycle(t *testing.T) {
	e := runtimetest.Start(t)
	const pods = 8
	var wg sync.WaitGroup
	errs := make(chan error, pods*4)
	done := make(chan struct{})
	var hk sync.WaitGroup
	hk.Add(1)
	go func() { // housekeeping
		defer hk.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{}); err != nil {
				errs <- err
				return
			}
			if _, err := e.Runtime.ListContainerStats(e.Ctx(), &runtimeapi.ListContainerStatsRequest{}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := 0; i < pods; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handler := []string{"runc", "crun"}[i%2]
			pod := e.PodWithLogs(fmt.Sprintf("conc-%d", i))
			rp, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: pod, RuntimeHandler: handler})
			if err != nil {
				errs <- err
				return
			}
			c, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{
				PodSandboxId: rp.PodSandboxId, Config: runtimetest.ContainerConfig("c", "sleep", "1000"), SandboxConfig: pod})
			if err != nil {
				errs <- err
				return
			}
			if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
				errs <- err
				return
			}
			r, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"echo", "hi"}})
			if err != nil || string(r.Stdout) != "hi\n" {
				errs <- fmt.Errorf("exec: %q %v", r.GetStdout(), err)
				return
			}
			if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 2}); err != nil {
				errs <- err
				return
			}
			if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(done)
	hk.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
