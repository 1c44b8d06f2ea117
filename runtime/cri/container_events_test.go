package cri_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func TestContainerEvents(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("events")
	sb := e.RunPod(pod, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *runtimeapi.ContainerEventResponse, 100)
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()
	// The stream is registered once the server has it; a first container's events prove it.
	var id string
	next := func(want runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("stream ended waiting for %v", want)
				}
				if ev.ContainerId == id && ev.ContainerEventType == want {
					return ev
				}
			case <-timeout:
				t.Fatalf("no %v event for %s", want, id)
			}
		}
	}
	// The server registers the stream a moment after the client has it: probe with containers
	// until one's CREATED event arrives, then follow a fresh container from the start.
	for i := 0; ; i++ {
		id = e.CreateContainer(sb, pod, runtimetest.ContainerConfig(fmt.Sprintf("probe%d", i), "true"))
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream ended")
			}
			_ = ev
		case <-time.After(time.Second):
			if i == 60 {
				t.Fatal("no event for a minute")
			}
			continue
		}
		break
	}
	for drained := false; !drained; {
		select {
		case <-events:
		default:
			drained = true
		}
	}
	id = e.CreateContainer(sb, pod, runtimetest.ContainerConfig("ev", "sh", "-c", "sleep 0.2; exit 2"))
	ev := next(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	if ev.CreatedAt == 0 || ev.PodSandboxStatus.GetId() != sb || statusOf(ev, id) == nil {
		t.Fatalf("created event: %v", ev)
	}
	if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	next(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	ev = next(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	if st := statusOf(ev, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 2 {
		t.Fatalf("stopped event status: %v", st)
	}
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if ev := next(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT); statusOf(ev, id) != nil {
		t.Fatalf("deleted event still lists the container: %v", ev)
	}
}

func statusOf(ev *runtimeapi.ContainerEventResponse, id string) *runtimeapi.ContainerStatus {
	for _, st := range ev.ContainersStatuses {
		if st.Id == id {
			return st
		}
	}
	return nil
}
