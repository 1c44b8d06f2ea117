package cri_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func TestContainerStopGraceAndKill(t *testing.T) {
	for _, handler := range []string{"runc", "crun", "runsc"} {
		t.Run(handler, func(t *testing.T) { testStop(t, handler) })
	}
}

func testStop(t *testing.T, handler string) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("stop-" + handler)
	sb := e.RunPod(pod, handler)

	// Honours SIGTERM within the grace period: its own exit code.
	polite := runtimetest.ContainerConfig("polite", "sh", "-c", "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.1; done")
	id1 := e.RunContainer(sb, pod, polite)
	e.WaitLog(e.Status(id1).LogPath, "ready")
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: id1, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(id1); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 7 {
		t.Fatalf("polite: %+v", st)
	}
	e.WaitLog(e.Status(id1).LogPath, "bye")

	// Ignores SIGTERM: killed after the grace period.
	stubborn := runtimetest.ContainerConfig("stubborn", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done")
	id2 := e.RunContainer(sb, pod, stubborn)
	e.WaitLog(e.Status(id2).LogPath, "ready")
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: id2, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(id2); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("stubborn: %+v", st)
	}

	// The request's stop signal replaces SIGTERM.
	usr1 := runtimetest.ContainerConfig("usr1", "sh", "-c", "trap 'exit 5' USR1; echo ready; while :; do sleep 0.1; done")
	usr1.StopSignal = runtimeapi.Signal_SIGUSR1
	id3 := e.RunContainer(sb, pod, usr1)
	e.WaitLog(e.Status(id3).LogPath, "ready")
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: id3, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(id3); st.ExitCode != 5 {
		t.Fatalf("usr1: %+v", st)
	}

	// Stopping twice, and stopping a never-started container, succeed.
	id4 := e.CreateContainer(sb, pod, runtimetest.ContainerConfig("never", "sleep", "100"))
	for _, id := range []string{id1, id4, id4} {
		if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
			t.Fatalf("stop %s: %v", id, err)
		}
	}
	if st := e.Status(id4); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("never-started after stop: %+v", st)
	}
	// Removing a running container kills it.
	id5 := e.RunContainer(sb, pod, runtimetest.ContainerConfig("running", "sleep", "1000"))
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: id5}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: id5}); err == nil {
		t.Fatal("status of a removed container succeeded")
	}
}
