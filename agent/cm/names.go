package cm

import (
	"strings"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// QoSTiers are the cgroups pod cgroups are made in, below the pods' root: the root itself
// (Guaranteed pods), burstable and besteffort.
var QoSTiers = [...]string{"", "burstable", "besteffort"}

// PodCgroups names the cgroups of the pods' tree as the kubelet does (its qosContainerManager and
// GetPodContainerName): a QoS tier's below the root, pod<uid> in the pod's tier. The names become
// paths through the cgroup driver, the only place that knows how.
type PodCgroups struct {
	Root   string          // the pods' root cgroup ("/kubepods"), as --cgroup-root gives it
	Driver cgroupfs.Driver // nil: cgroupfs
}

func (n PodCgroups) driver() cgroupfs.Driver {
	if n.Driver == nil {
		return cgroupfs.Cgroupfs{}
	}
	return n.Driver
}

func (n PodCgroups) tierName(tier string) []string {
	name := cgroupfs.SplitName(n.Root)
	if tier != "" {
		name = append(name, tier)
	}
	return name
}

// Tier is the path of a QoS tier's cgroup (one of QoSTiers; "" is the root).
func (n PodCgroups) Tier(tier string) string {
	return n.driver().Path(n.tierName(tier))
}

// Pod is the path of the cgroup of the pod with uid in tier. The UID must be one path element.
func (n PodCgroups) Pod(tier, uid string) string {
	return n.driver().Path(append(n.tierName(tier), podPrefix+uid))
}

// podPrefix starts the last element of a pod cgroup's name.
const podPrefix = "pod"

// PodUID is the UID of the pod whose cgroup folder (as cgroupfs names it) is elem; ok is false
// for a folder that is no pod's.
func PodUID(elem string) (uid string, ok bool) {
	uid, ok = strings.CutPrefix(elem, podPrefix)
	return uid, ok && uid != ""
}
