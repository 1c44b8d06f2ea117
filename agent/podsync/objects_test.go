package podsync

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/podworkers"
)

// order records the calls of the pod objects and volumes fakes, in one list.
type order struct{ calls []string }

type orderObjects struct{ *order }

func (o orderObjects) RegisterPod(*v1.Pod)     { o.calls = append(o.calls, "register") }
func (o orderObjects) UnregisterPod(types.UID) { o.calls = append(o.calls, "unregister") }

type orderVolumes struct{ *order }

func (o orderVolumes) Prepare(context.Context, *v1.Pod) error {
	o.calls = append(o.calls, "prepare")
	return nil
}
func (o orderVolumes) TearDown(types.UID) error { o.calls = append(o.calls, "teardown"); return nil }
func (o orderVolumes) TearDownVolumes(types.UID) error {
	o.calls = append(o.calls, "teardown volumes")
	return nil
}
func (o orderVolumes) Forget(types.UID) {}

// TestPodObjectsOutliveTheVolumesThatUseThem: a pod's Secrets and ConfigMaps are registered
// before its volumes are made (and its env read), and unregistered only after its volumes are
// gone, whether the pod was deleted or merely finished.
func TestPodObjectsOutliveTheVolumesThatUseThem(t *testing.T) {
	for _, deleted := range []bool{true, false} {
		s, cri, _ := newSyncer(t)
		cri.AddImage("busybox:1")
		o := &order{}
		s.Objects, s.Volumes = orderObjects{o}, orderVolumes{o}
		pod := apiPod("")
		if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncTerminatingPod(context.Background(), pod, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncTerminatedPod(context.Background(), pod, deleted); err != nil {
			t.Fatal(err)
		}
		want := []string{"register", "prepare", "teardown", "unregister"}
		if !deleted {
			want = []string{"register", "prepare", "teardown volumes", "unregister"}
		}
		if !slices.Equal(o.calls, want) {
			t.Errorf("deleted %v: %q, want %q", deleted, o.calls, want)
		}
	}
}
