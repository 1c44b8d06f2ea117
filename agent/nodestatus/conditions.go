package nodestatus

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameButHeartbeats reports whether two statuses differ in nothing but their conditions'
// heartbeat times, as the kubelet's nodeStatusHasChanged.
func sameButHeartbeats(a, b *v1.NodeStatus) bool {
	strip := func(s *v1.NodeStatus) *v1.NodeStatus {
		s = s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// pressureTypes are the conditions Pressure gives, in the kubelet's order.
var pressureTypes = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// pressureEvents are the kubelet's event reasons for a pressure condition becoming False or True;
// false for a condition that is not a pressure condition.
func pressureEvents(t v1.NodeConditionType) ([2]string, bool) {
	switch t {
	case v1.NodeMemoryPressure:
		return [2]string{"NodeHasSufficientMemory", "NodeHasInsufficientMemory"}, true
	case v1.NodeDiskPressure:
		return [2]string{"NodeHasNoDiskPressure", "NodeHasDiskPressure"}, true
	case v1.NodePIDPressure:
		return [2]string{"NodeHasSufficientPID", "NodeHasInsufficientPID"}, true
	}
	return [2]string{}, false
}

// changedFields names the fields of the status that differ, heartbeats aside (for the log line
// saying why an update was posted before its report period).
func changedFields(a, b *v1.NodeStatus) []string {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, s := range []*v1.NodeStatus{a, b} {
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
	}
	var out []string
	for name, pair := range map[string][2]any{
		"capacity": {a.Capacity, b.Capacity}, "allocatable": {a.Allocatable, b.Allocatable},
		"conditions": {a.Conditions, b.Conditions}, "addresses": {a.Addresses, b.Addresses},
		"nodeInfo": {a.NodeInfo, b.NodeInfo}, "images": {a.Images, b.Images},
		"runtimeHandlers": {a.RuntimeHandlers, b.RuntimeHandlers}, "volumesInUse": {a.VolumesInUse, b.VolumesInUse},
		"daemonEndpoints": {a.DaemonEndpoints, b.DaemonEndpoints}, "features": {a.Features, b.Features},
	} {
		if !apiequality.Semantic.DeepEqual(pair[0], pair[1]) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
