package status

import v1 "k8s.io/api/core/v1"

// NeedsReadinessReconcile reports whether a pod, as the apiserver holds it, carries a Ready
// condition that its readiness gates' conditions contradict: someone else (a load balancer
// controller…) has set or changed a gate's condition since the agent last wrote Ready. The
// SyncLoop then wakes the pod's worker, whose next status carries the new Ready, instead of leaving
// it to the periodic sync a minute later. Only the status the apiserver returned is read, so a
// pod without readiness gates, or whose Ready the agent has not written yet, never needs it.
func NeedsReadinessReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var current *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			current = &pod.Status.Conditions[i]
			break
		}
	}
	if current == nil {
		return false
	}
	ready, _, message := containersReadyCondition(pod, &pod.Status)
	if ready {
		ready, _, message = readinessGates(pod, pod.Status.Conditions)
	}
	want := v1.ConditionFalse
	if ready {
		want = v1.ConditionTrue
	}
	return current.Status != want || current.Message != message
}
