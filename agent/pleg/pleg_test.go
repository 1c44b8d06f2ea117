package pleg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/fakecri"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func startContainer(t *testing.T, rt runtimeapi.RuntimeServiceClient, uid, name string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{kubecontainer.LabelPodUID: uid}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: uid}, Labels: labels}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "x"}, Labels: labels}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	return c.ContainerId
}

// waitFor reads events until one matches; the timeout only guards against a hang.
func waitFor(t *testing.T, g *GenericPLEG, uid string, typ EventType, id string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-g.Watch():
			if e.ID == types.UID(uid) && e.Type == typ && e.Data == id {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event for %s/%s", typ, uid, id)
		}
	}
}

func TestEventsFromStreamThenRelistFallback(t *testing.T) {
	cri := fakecri.Start(t)
	g := New(cri.Runtime(), Options{RelistPeriod: 50 * time.Millisecond, RelistPeriodWithEvents: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	// Until the stream brings its first event, fast relisting covers what it might have missed.
	id := startContainer(t, cri.Runtime(), "u1", "a")
	waitFor(t, g, "u1", ContainerStarted, id)
	// The stream counts only from its first event, and that start may have been sent before the
	// stream was subscribed (relisting found it instead): give the stream events of its own until
	// it has carried one.
	for i := 0; !g.Streaming(); i++ {
		startContainer(t, cri.Runtime(), fmt.Sprintf("warm%d", i), "w")
		for j := 0; j < 20 && !g.Streaming(); j++ {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cri.ExitContainer(id, 3)
	waitFor(t, g, "u1", ContainerDied, id)

	// The stream goes away: relisting takes over.
	cri.DisableEvents()
	for g.Streaming() {
		time.Sleep(5 * time.Millisecond)
	}
	id2 := startContainer(t, cri.Runtime(), "u2", "b")
	waitFor(t, g, "u2", ContainerStarted, id2)
	if _, err := cri.Runtime().RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g, "u2", ContainerRemoved, id2)
	if err := g.Healthy(); err != nil {
		t.Fatal(err)
	}
}

func TestRelistReportsEachChangeOnce(t *testing.T) {
	cri := fakecri.Start(t)
	cri.DisableEvents()
	g := New(cri.Runtime(), Options{})
	ctx := context.Background()
	id := startContainer(t, cri.Runtime(), "u1", "a")
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	got := drain(g)
	if len(got) != 2 { // the sandbox and the container started
		t.Fatalf("first relist events %v", got)
	}
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(g); len(got) != 0 {
		t.Fatalf("unchanged relist reported %v", got)
	}
	cri.ExitContainer(id, 0)
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(g); len(got) != 1 || got[0].Type != ContainerDied || got[0].Data != id {
		t.Fatalf("after exit %v", got)
	}
}

func drain(g *GenericPLEG) []PodLifecycleEvent {
	var out []PodLifecycleEvent
	for {
		select {
		case e := <-g.Watch():
			out = append(out, *e)
		default:
			return out
		}
	}
}
