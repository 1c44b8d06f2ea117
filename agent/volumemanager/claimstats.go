package volumemanager

import (
	"cmp"
	"context"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/metrics"
)

// PodClaimStats are the pod's claimed volumes (and inline CSI ones) as the kubelet's summary
// reports them, each with its claim: local PVs (a folder, or a block device's filesystem) measured by statfs as the
// kubelet's local plugin measures them, CSI volumes by their driver (NodeGetVolumeStats, when it
// offers it). hostPath PVs and raw block devices are not measured, as the kubelet does not.
func (m *Manager) PodClaimStats(ctx context.Context, uid types.UID) []statsapi.VolumeStats {
	type one struct {
		name string
		c    claimed
	}
	m.mu.Lock()
	var list []one
	for name, c := range m.claims[uid] {
		list = append(list, one{name, c})
	}
	m.mu.Unlock()
	slices.SortFunc(list, func(a, b one) int { return cmp.Compare(a.name, b.name) })
	var out []statsapi.VolumeStats
	for _, v := range list {
		fs := m.measureClaim(ctx, v.c)
		if fs == nil {
			continue
		}
		vs := statsapi.VolumeStats{Name: v.name, FsStats: *fs}
		if v.c.claim != "" { // an inline CSI volume has none
			vs.PVCRef = &statsapi.PVCReference{Name: v.c.claim, Namespace: v.c.namespace}
		}
		out = append(out, vs)
	}
	return out
}

// ClaimStats are the claims the node's pods use, once each (by namespace, then claim), measured:
// what kubelet_volume_stats_* report.
func (m *Manager) ClaimStats() []metrics.VolumeClaim {
	m.mu.Lock()
	seen := map[[2]string]bool{}
	var list []claimed
	for _, vols := range m.claims {
		for _, c := range vols {
			k := [2]string{c.namespace, c.claim}
			if c.claim == "" || seen[k] {
				continue
			}
			seen[k] = true
			list = append(list, c)
		}
	}
	m.mu.Unlock()
	var out []metrics.VolumeClaim
	for _, c := range list {
		if fs := m.measureClaim(context.Background(), c); fs != nil {
			out = append(out, metrics.VolumeClaim{Namespace: c.namespace, Claim: c.claim, FS: *fs})
		}
	}
	slices.SortFunc(out, func(a, b metrics.VolumeClaim) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Claim, b.Claim))
	})
	return out
}

// measureClaim is one claimed volume's figures, nil when it is not measured (or cannot be now).
func (m *Manager) measureClaim(ctx context.Context, c claimed) *statsapi.FsStats {
	switch {
	case c.csi && m.CSI != nil:
		fs, err := m.CSI.VolumeStats(ctx, c.path)
		if err != nil {
			return nil
		}
		return fs
	case c.local:
		return statfs(c.path)
	case c.device:
		return deviceSize(c.path)
	}
	return nil
}

// deviceSize is a block device's capacity (its end, sought), with no usage: what the kubelet's
// block metrics give of a raw block volume.
func deviceSize(path string) *statsapi.FsStats {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil || end < 0 {
		return nil
	}
	capacity, zero := uint64(end), uint64(0)
	return &statsapi.FsStats{Time: metav1.Now(), CapacityBytes: &capacity, AvailableBytes: &zero, UsedBytes: &zero}
}

// statfs is the filesystem at path: capacity, available and used bytes, and inodes.
func statfs(path string) *statsapi.FsStats {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	capacity, avail, used := st.Blocks*bs, st.Bavail*bs, (st.Blocks-st.Bfree)*bs
	inodes, free, usedInodes := st.Files, st.Ffree, st.Files-st.Ffree
	return &statsapi.FsStats{Time: metav1.Now(), CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: &inodes, InodesFree: &free, InodesUsed: &usedInodes}
}
