package podsync

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/podworkers"
)

type releases []types.UID

func (r *releases) Release(uid types.UID) { *r = append(*r, uid) }

// TestTerminatedPodReleasesItsUserNamespace: as the kubelet, a pod's range of host IDs is freed
// once it has terminated, whether it finished and stays or was deleted, and not before.
func TestTerminatedPodReleasesItsUserNamespace(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		s, cri, _ := newSyncer(t)
		var r releases
		s.Userns = &r
		cri.AddImage("busybox:1")
		pod := apiPod("")
		if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncTerminatingPod(context.Background(), pod, nil); err != nil {
			t.Fatal(err)
		}
		if len(r) != 0 {
			t.Fatalf("released before termination ended: %v", r)
		}
		if err := s.SyncTerminatedPod(context.Background(), pod, deleted); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r, releases{pod.UID}) {
			t.Fatalf("deleted %v: released %v", deleted, r)
		}
	}
}
