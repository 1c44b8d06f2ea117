package cri_test

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// CreateContainer racing StopPodSandbox and RemovePodSandbox of its pod must never leave a
// container whose sandbox is gone: either the create loses (NotFound or FailedPrecondition) or
// the removal finds and removes the container. Several pods race at once, round after round,
// and the invariant is checked after each round.
func TestCreateContainerRacesSandboxRemoval(t *testing.T) {
	const workers, rounds = 4, 5
	e := runtimetest.Start(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if !raceOnce(t, e, fmt.Sprintf("race-%d-%d", w, r), r%2 == 0) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// raceOnce runs one pod's create against its removal; stop says whether a StopPodSandbox comes
// first. It reports whether the test may go on.
func raceOnce(t *testing.T, e *runtimetest.Env, name string, stop bool) bool {
	pod := e.PodWithLogs(name)
	resp, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Errorf("%s: RunPodSandbox: %v", name, err)
		return false
	}
	sb := resp.PodSandboxId
	var createErr, removeErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, createErr = e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{
			PodSandboxId: sb, Config: runtimetest.ContainerConfig("app", "true"), SandboxConfig: pod})
	}()
	go func() {
		defer wg.Done()
		if stop {
			if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
				removeErr = err
				return
			}
		}
		_, removeErr = e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	}()
	wg.Wait()
	if removeErr != nil {
		t.Errorf("%s: stop/remove: %v", name, removeErr)
		return false
	}
	if c := status.Code(createErr); createErr != nil && c != codes.NotFound && c != codes.FailedPrecondition {
		t.Errorf("%s: the losing create = %v, want NotFound or FailedPrecondition", name, createErr)
		return false
	}
	list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb}})
	if err != nil {
		t.Errorf("%s: ListContainers: %v", name, err)
		return false
	}
	if len(list.Containers) > 0 {
		t.Errorf("%s: container %s outlived the removal of its sandbox", name, list.Containers[0].Id)
		return false
	}
	return true
}
