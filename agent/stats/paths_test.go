package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestClimbingPodRefReadsNothingOutside: a pod reference whose UID or name climbs out of the root
// or log folder is not measured there (the summary would otherwise walk any host folder).
func TestClimbingPodRefReadsNothingOutside(t *testing.T) {
	base := t.TempDir()
	root, logs := filepath.Join(base, "root"), filepath.Join(base, "logs")
	outside := filepath.Join(base, "decoy", "volumes", "kubernetes.io~empty-dir", "v")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "f"), make([]byte, 1000), 0o644)
	os.MkdirAll(logs, 0o755)
	cases := []struct {
		name string
		ref  statsapi.PodReference
	}{
		{"uid", statsapi.PodReference{Namespace: "ns", Name: "web", UID: "../../decoy"}},
		{"uid reaching the decoy from both folders", statsapi.PodReference{Namespace: "ns", Name: "web", UID: "x/../../../decoy"}},
		{"namespace", statsapi.PodReference{Namespace: "..", Name: "web", UID: "u1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(nil, Options{RootDir: root, LogDir: logs})
			ps := &statsapi.PodStats{PodRef: c.ref}
			now := metav1.NewTime(time.Unix(1, 0))
			p.addStorage(ps, now)
			p.addVolumes(context.Background(), ps, now)
			if len(ps.VolumeStats) != 0 {
				t.Fatalf("volumes measured outside the root: %+v", ps.VolumeStats)
			}
			if u := *ps.EphemeralStorage.UsedBytes; u != 0 {
				t.Fatalf("ephemeral storage %d measured outside the log folder", u)
			}
		})
	}
}
