package nodestatus

import (
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
