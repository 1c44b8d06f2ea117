package kuberuntime

import (
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// cgroupMounts are where cgroup hierarchies are mounted: every v1 controller folder, the v2 unified
// one beside them, or the v2 root.
const cgroupFS = "/sys/fs/cgroup"

// removePodCgroups removes the pod's cgroup (left empty once its containers are gone) in every
// hierarchy. Runtimes create the parents they are given but never remove them; without this, each
// pod would leave empty <root>/<qos>/pod<uid> folders behind. Removal fails harmlessly on a cgroup
// that still has processes, and is retried at the pod's next removal pass.
func (m *Manager) removePodCgroups(uid types.UID) {
	// A UID that is not one path element never got a cgroup, and joined it would climb out of the QoS one.
	if m.CgroupRoot == "" || podpath.Element("pod UID", string(uid)) != nil {
		return
	}
	bases := []string{cgroupFS}
	if ents, err := os.ReadDir(cgroupFS); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				bases = append(bases, filepath.Join(cgroupFS, e.Name()))
			}
		}
	}
	pod := "pod" + string(uid)
	for _, b := range bases {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			os.Remove(filepath.Join(b, m.CgroupRoot, qos, pod))
		}
	}
}
