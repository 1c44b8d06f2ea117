package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type claimStats map[types.UID][]statsapi.VolumeStats

func (c claimStats) PodClaimStats(_ context.Context, uid types.UID) []statsapi.VolumeStats {
	return c[uid]
}

// A pod's claimed volumes come from the volume manager with their claims; a CSI volume's folder
// (the driver's mount, vol_data.json beside it) is not measured as a folder of the node.
func TestClaimedVolumes(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"kubernetes.io~csi/data/mount", "kubernetes.io~empty-dir/scratch"} {
		if err := os.MkdirAll(filepath.Join(root, "pods", "u1", "volumes", dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	capacity := uint64(1 << 30)
	claims := claimStats{"u1": {{Name: "data", PVCRef: &statsapi.PVCReference{Name: "db", Namespace: "ns"},
		FsStats: statsapi.FsStats{CapacityBytes: &capacity}}}}
	p := New(nil, Options{RootDir: root, LogDir: t.TempDir(), Claims: claims})
	ps := &statsapi.PodStats{PodRef: statsapi.PodReference{Namespace: "ns", Name: "web", UID: "u1"}}
	now := metav1.NewTime(time.Unix(1, 0))
	p.addStorage(ps, now)
	p.addVolumes(context.Background(), ps, now)
	if len(ps.VolumeStats) != 2 || ps.VolumeStats[0].Name != "scratch" || ps.VolumeStats[1].Name != "data" ||
		ps.VolumeStats[1].PVCRef == nil || ps.VolumeStats[1].PVCRef.Name != "db" || *ps.VolumeStats[1].CapacityBytes != capacity {
		t.Fatalf("volume stats %+v", ps.VolumeStats)
	}
}
