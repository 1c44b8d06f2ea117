package cri_test

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestContainerRecoverAfterDaemonKill stops the server without touching its containers, as a
// SIGKILL would, lets one container exit while no daemon runs, and starts a fresh server on the
// same dirs.
func TestContainerRecoverAfterDaemonKill(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("recover")
	sb := e.RunPod(pod, "")
	ticker := e.RunContainer(sb, pod, runtimetest.ContainerConfig("ticker", "sh", "-c", "i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.05; done"))
	waiter := e.RunContainer(sb, pod, runtimetest.ContainerConfig("waiter", "sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done; exit 42"))
	tickLog := e.Status(ticker).LogPath
	e.WaitLog(tickLog, "tick 1")
	waiterPid := containerPids(t, e, waiter).Pid

	e.Engine.CloseContainers() // the old daemon's watchers die with it
	e.Stop()
	// While no daemon runs, the waiter exits (through its rootfs, so no runtime call is needed).
	if _, err := os.Create(e.Dir + "/overlays/" + waiter + "/upper/tmp/go"); err != nil {
		// The upper dir has no /tmp until written; make it.
		if err := os.MkdirAll(e.Dir+"/overlays/"+waiter+"/merged/tmp", 0o1777); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Create(e.Dir + "/overlays/" + waiter + "/merged/tmp/go"); err != nil {
			t.Fatal(err)
		}
	}
	// The waiter must be gone before the restart, or the test would not prove an exit that
	// happened while no daemon ran; its conmon reaps it.
	for syscall.Kill(waiterPid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	sizeDown, _ := os.Stat(tickLog)

	e.Restart()
	st := e.Status(ticker)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ticker after restart: %v", st)
	}
	list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(list.Containers) != 1 || list.Containers[0].Id != ticker {
		t.Fatalf("running after restart: %v %v", list, err)
	}
	w := e.WaitContainerState(waiter, runtimeapi.ContainerState_CONTAINER_EXITED)
	if w.ExitCode != 42 || w.Reason != "Error" {
		t.Fatalf("waiter after restart: %+v", w)
	}
	// The log keeps growing: conmon kept running.
	deadline := time.Now().Add(time.Minute)
	for {
		fi, _ := os.Stat(tickLog)
		if fi.Size() > sizeDown.Size()+100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("log stopped growing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The recovered container stops like any other: the new watcher sees its exit.
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: ticker, Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(ticker); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 && st.ExitCode != 137 {
		t.Fatalf("ticker after stop: %+v", st)
	}
	b, _ := os.ReadFile(tickLog)
	if !strings.Contains(string(b), "stdout F tick") {
		t.Fatalf("log: %.200s", b)
	}
}

// TestContainerRecoverLostMonitor kills a container's conmon and then the container while no daemon
// runs: no exit file is ever written, and the restarted daemon must still report the container as
// exited (with an unknown exit code) and remove it cleanly.
func TestContainerRecoverLostMonitor(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("lost")
	sb := e.RunPod(pod, "")
	id := e.RunContainer(sb, pod, runtimetest.ContainerConfig("orphan", "sleep", "1000"))
	info := containerPids(t, e, id)
	e.Engine.CloseContainers()
	e.Stop()
	for _, pid := range []int{info.ConmonPid, info.Pid} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	for syscall.Kill(info.Pid, 0) == nil { // until it is reaped
		time.Sleep(10 * time.Millisecond)
	}
	e.Restart()
	st := e.Status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "Unknown" || st.ExitCode != 255 {
		t.Fatalf("status: %+v", st)
	}
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
}

// TestContainerMonitorDeath kills a running container's conmon and then the container while the
// daemon runs: no exit file comes, and the periodic monitor check must still notice the exit.
func TestContainerMonitorDeath(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("monitor")
	sb := e.RunPod(pod, "")
	id := e.RunContainer(sb, pod, runtimetest.ContainerConfig("orphan", "sleep", "1000"))
	info := containerPids(t, e, id)
	for _, pid := range []int{info.ConmonPid, info.Pid} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	st := e.WaitContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.Reason != "Unknown" || st.ExitCode != 255 {
		t.Fatalf("status: %+v", st)
	}
}

// containerPids reads the container's and its conmon's PIDs from the verbose status.
func containerPids(t *testing.T, e *runtimetest.Env, id string) (info struct {
	Pid       int `json:"pid"`
	ConmonPid int `json:"conmonPid"`
}) {
	t.Helper()
	resp, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.Pid == 0 || info.ConmonPid == 0 {
		t.Fatalf("info %q: %v", resp.Info["info"], err)
	}
	return info
}
