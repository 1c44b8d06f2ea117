package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Reason and message the kubelet gives a container that has no terminated state when its pod has
// ended: nothing proves how it ended, so it is counted as failed.
const (
	reasonStatusUnknown  = "ContainerStatusUnknown"
	messageStatusUnknown = "The container could not be located when the pod was terminated"
)

// TerminatePod makes the last status of a pod whose containers are all gone final, as the kubelet's
// status manager does when a pod worker finishes: once the pod has initialized, every container
// with no terminated state is reported terminated with exit code 137 (as are the init containers
// up to the last one that was tried), and a pod from the apiserver still Pending or Running becomes
// Failed — a pod deleted before its containers ran has failed, not succeeded, and its controller
// must see a terminal phase. A static pod keeps its phase, as with the kubelet.
func (m *Manager) TerminatePod(pod *v1.Pod, now time.Time) {
	m.mu.Lock()
	s := *pod.Status.DeepCopy()
	if e, ok := m.entries[pod.UID]; ok {
		s = *e.status.DeepCopy()
	}
	m.mu.Unlock()

	if hasInitialized(pod, &s) {
		for i := range s.ContainerStatuses {
			markUnknown(&s.ContainerStatuses[i])
		}
	}
	tried := triedPrefix(s.InitContainerStatuses)
	for i := range tried {
		markUnknown(&tried[i])
	}
	if !isStatic(pod) && (s.Phase == v1.PodPending || s.Phase == v1.PodRunning || s.Phase == "") {
		s.Phase = v1.PodFailed
	}
	if s.Phase == v1.PodFailed || s.Phase == v1.PodSucceeded {
		ok, reason, msg := containersReadyCondition(pod, &s)
		for i := range s.Conditions {
			if c := &s.Conditions[i]; c.Type == v1.ContainersReady || c.Type == v1.PodReady {
				setCondition(c, ok, reason, msg, now)
			}
		}
	}
	m.SetPodStatus(pod, s)
}

func markUnknown(c *v1.ContainerStatus) {
	if c.State.Terminated != nil {
		return
	}
	c.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: reasonStatusUnknown, Message: messageStatusUnknown, ExitCode: 137}}
}

// hasInitialized reports whether the pod shows any sign of having got past its init containers:
// it has none, an app container left waiting once, or its last init container finished well (or,
// a sidecar, started).
func hasInitialized(pod *v1.Pod, s *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, c := range s.ContainerStatuses {
		if c.LastTerminationState.Terminated != nil || c.State.Waiting == nil {
			return true
		}
	}
	n := len(s.InitContainerStatuses)
	if n == 0 {
		return false
	}
	last := s.InitContainerStatuses[n-1]
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		if spec.Name != last.Name {
			continue
		}
		if isSidecar(spec) {
			return last.State.Running != nil && last.Started != nil && *last.Started
		}
		for _, t := range []*v1.ContainerStateTerminated{last.LastTerminationState.Terminated, last.State.Terminated} {
			if t != nil && t.ExitCode == 0 {
				return true
			}
		}
	}
	return false
}

// triedPrefix is the init containers' statuses up to the last one that ever left waiting (at least
// the first): those after it were never tried and stay waiting.
func triedPrefix(statuses []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(statuses) - 1; i >= 0; i-- {
		if statuses[i].State.Waiting == nil || statuses[i].LastTerminationState.Terminated != nil {
			return statuses[:i+1]
		}
	}
	if len(statuses) > 0 {
		return statuses[:1]
	}
	return nil
}
