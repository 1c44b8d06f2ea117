package eviction

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// evictOne evicts the first pod in rank order that may be evicted.
func (m *Manager) evictOne(ctx context.Context, t Threshold, obs Observations) *v1.Pod {
	pods := m.deps.ActivePods()
	if len(pods) == 0 {
		m.deps.Log.Error("eviction manager: no pods to evict", "signal", t.Signal)
		return nil
	}
	usage := map[types.UID]PodUsage{}
	if m.deps.Stats != nil {
		var err error
		if usage, err = m.deps.Stats.PodUsage(ctx); err != nil {
			m.deps.Log.Error("eviction manager: pod usage", "err", err)
			return nil
		}
	}
	Rank(t.Signal, pods, usage)
	for _, p := range pods {
		if IsCriticalPod(p) {
			continue
		}
		grace := hardEvictionGracePeriod
		if !t.hard() {
			grace = m.cfg.MaxPodGracePeriodSeconds
			if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g < grace {
				grace = *g
			}
		}
		if m.evict(p, grace, evictionMessage(t, obs[t.Signal], p, usage[p.UID]), string(t.Signal)) {
			return p
		}
	}
	m.deps.Log.Error("eviction manager: no pod could be evicted", "signal", t.Signal)
	return nil
}

// evict records the Evicted event, kills the pod with the grace period and counts the eviction
// by signal; false when the kill could not be started.
func (m *Manager) evict(p *v1.Pod, grace int64, msg, signal string) bool {
	if m.deps.Recorder != nil {
		m.deps.Recorder.Eventf(p, v1.EventTypeWarning, ReasonEvicted, "%s", msg)
	}
	if err := m.deps.Kill(p, grace, msg); err != nil {
		m.deps.Log.Error("eviction manager: evict pod", "pod", p.Namespace+"/"+p.Name, "err", err)
		return false
	}
	if m.deps.Evicted != nil {
		m.deps.Evicted(signal)
	}
	m.deps.Log.Warn("evicted pod", "pod", p.Namespace+"/"+p.Name, "signal", signal, "gracePeriod", grace)
	return true
}

// evictionMessage is the evicted pod's status message, worded as the kubelet's.
func evictionMessage(t Threshold, o Observation, pod *v1.Pod, u PodUsage) string {
	res := resourceOf(t.Signal)
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	msg += fmt.Sprintf(thresholdMetMessageFmt, quantity(t.Signal, t.value(o.Capacity)), quantity(t.Signal, o.Available))
	if res == "pids" {
		return msg
	}
	for _, c := range pod.Spec.Containers {
		cu, ok := u.Containers[c.Name]
		if !ok {
			continue
		}
		used := cu.Memory
		if res == v1.ResourceEphemeralStorage {
			used = cu.Disk
		}
		req := c.Resources.Requests[res]
		if used > req.Value() {
			msg += fmt.Sprintf(containerMessageFmt, c.Name, quantity(t.Signal, used), req.String(), res)
		}
	}
	return msg
}

func quantity(s Signal, v int64) string {
	if s == SignalPIDAvailable || s == SignalNodeFsInodesFree || s == SignalImageFsInodesFree {
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}
