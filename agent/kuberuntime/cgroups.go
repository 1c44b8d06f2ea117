package kuberuntime

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// removePodCgroups removes the pod's cgroup (left empty once its containers are gone), and any
// container cgroups the runtime left below it, in every hierarchy. The agent made the pod cgroup
// and runtimes never remove the parents they are given; without this, each pod would leave empty
// <root>/<qos>/pod<uid> folders behind. Removal fails harmlessly on a cgroup that still has
// processes: the QoS manager's scan for orphans takes it up later.
func (m *Manager) removePodCgroups(uid types.UID) {
	// A UID that is not one path element never got a cgroup, and joined it would climb out of the QoS one.
	if m.CgroupRoot == "" || podpath.Element("pod UID", string(uid)) != nil {
		return
	}
	c := m.Cgroups
	if c == nil {
		h := cm.HostCgroups()
		c = &h
	}
	names := cm.PodCgroups{Root: m.CgroupRoot}
	for _, tier := range cm.QoSTiers {
		c.Remove(names.Pod(tier, string(uid)))
	}
}
