package status

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SetContainerReadiness records a readiness probe's flip in the pod's last status at once, with
// its ContainersReady and Ready conditions, as the kubelet's status manager does. The pod's worker
// may be busy for a whole grace period killing the pod, and a container that stops being ready
// while it terminates must leave its Services now, not when the kill ends.
func (m *Manager) SetContainerReadiness(uid types.UID, containerID string, ready bool, now time.Time) {
	m.mu.Lock()
	e, ok := m.entries[uid]
	if !ok {
		m.mu.Unlock()
		return
	}
	pod, s := e.pod, *e.status.DeepCopy()
	m.mu.Unlock()
	if !setReady(s.ContainerStatuses, containerID, ready) && !setReady(s.InitContainerStatuses, containerID, ready) {
		return
	}
	ctrOK, ctrReason, ctrMsg := containersReadyCondition(pod, &s)
	readyOK, readyReason, readyMsg := ctrOK, ctrReason, ctrMsg
	if ctrOK {
		readyOK, readyReason, readyMsg = readinessGates(pod, pod.Status.Conditions)
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		switch c.Type {
		case v1.ContainersReady:
			setCondition(c, ctrOK, ctrReason, ctrMsg, now)
		case v1.PodReady:
			setCondition(c, readyOK, readyReason, readyMsg, now)
		}
	}
	m.SetPodStatus(pod, s)
}

// setReady sets Ready on the running container whose ID (runtime://id) is containerID; it reports
// whether that changed anything.
func setReady(statuses []v1.ContainerStatus, containerID string, ready bool) bool {
	for i := range statuses {
		c := &statuses[i]
		if c.State.Running == nil || !strings.HasSuffix(c.ContainerID, "://"+containerID) {
			continue
		}
		if c.Ready == ready {
			return false
		}
		c.Ready = ready
		return true
	}
	return false
}

func setCondition(c *v1.PodCondition, ok bool, reason, message string, now time.Time) {
	st := v1.ConditionFalse
	if ok {
		st = v1.ConditionTrue
	}
	if c.Status != st {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status, c.Reason, c.Message = st, reason, message
}
