package volumemanager

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// A published CSI claim the controller has grown is grown on the node at the next sync, and its
// status finished as the kubelet finishes it; a failed expansion leaves the pod going, the claim
// marked NodeResizeError, and is tried again.
func TestExpandClaim(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "grown", true: "failed"}[fail], func(t *testing.T) {
			c := claim("db", "pv-csi", v1.ClaimBound)
			c.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
			c.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
			c.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue}}
			p := pv("pv-csi", "uid-db", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}})
			p.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
			client := kubefake.New(c, p)
			f := &fakeCSI{dir: t.TempDir()}
			if fail {
				f.expandErr = errors.New("no room")
			}
			m := &Manager{RootDir: t.TempDir(), Claims: client, CSI: f}
			pod := claimPod("db", false)
			for range 2 { // the first sync publishes, the second expands
				if err := m.Prepare(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(f.expanded, []int64{2 << 30}) {
				t.Fatalf("expanded to %v, want once to 2Gi", f.expanded)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "db", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			size := got.Status.Capacity[v1.ResourceStorage]
			if fail {
				if got.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress ||
					len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != v1.PersistentVolumeClaimNodeResizeError || size.String() != "1Gi" {
					t.Fatalf("claim status after a failure %+v", got.Status)
				}
				return
			}
			if size.String() != "2Gi" || len(got.Status.AllocatedResourceStatuses) != 0 || len(got.Status.Conditions) != 0 {
				t.Fatalf("claim status after expansion %+v", got.Status)
			}
			if err := m.Prepare(context.Background(), pod); err != nil || len(f.expanded) != 1 {
				t.Fatalf("a finished expansion done again: %v %v", err, f.expanded)
			}
		})
	}
}
