package metrics

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodStartTracker turns what the agent sees of a pod into kubelet_pod_start_sli_duration_seconds
// and kubelet_pod_start_duration_seconds, once per pod, the way the kubelet's startup latency
// tracker defines them: the SLI runs from the pod's creation to all of its containers seen
// running, minus the time spent pulling images; the plain duration runs from the agent first
// seeing the pod. Pods already running when first seen (an agent restart) are not counted.
type PodStartTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*podStartState
	now  func() time.Time
}

type podStartState struct {
	firstSeen           time.Time
	firstPull, lastPull time.Time
	done                bool
}

// PodStarts is the tracker the agent's parts share: pod workers report pods as they arrive, image
// pulls report their span, and the status manager reports the pod's status as it changes. (Its
// map is made with the first pod: a map made here would be made at init, in every mode.)
var PodStarts = &PodStartTracker{now: time.Now}

// NewPodStartTracker returns an empty tracker.
func NewPodStartTracker() *PodStartTracker {
	return &PodStartTracker{now: time.Now}
}

// ObservedPod is called with a pod and its latest status whenever either changes (the status
// manager's updates are the natural place).
func (t *PodStartTracker) ObservedPod(pod *v1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	st, ok := t.pods[pod.UID]
	started := allContainersRunning(pod)
	if !ok {
		st = &podStartState{firstSeen: now, done: started}
		t.add(pod.UID, st)
	}
	if st.done || !started {
		return
	}
	st.done = true
	ObservePodStart(now.Sub(st.firstSeen))
	// A static pod has no creation time of its own: it was created when the agent read it.
	created := pod.CreationTimestamp.Time
	if created.IsZero() {
		created = st.firstSeen
	}
	sli := now.Sub(created)
	if !st.firstPull.IsZero() && st.lastPull.After(st.firstPull) {
		sli -= st.lastPull.Sub(st.firstPull)
	}
	ObservePodStartSLI(max(sli, 0))
}

// ImagePullStarted and ImagePullFinished bracket each pull done for a pod.
func (t *PodStartTracker) ImagePullStarted(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.state(uid)
	if st.firstPull.IsZero() {
		st.firstPull = t.now()
	}
}

func (t *PodStartTracker) ImagePullFinished(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.state(uid)
	st.lastPull = t.now()
}

// Forget drops a deleted pod.
func (t *PodStartTracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

func (t *PodStartTracker) state(uid types.UID) *podStartState {
	st, ok := t.pods[uid]
	if !ok {
		st = &podStartState{firstSeen: t.now()}
		t.add(uid, st)
	}
	return st
}

func (t *PodStartTracker) add(uid types.UID, st *podStartState) {
	if t.pods == nil {
		t.pods = map[types.UID]*podStartState{}
	}
	t.pods[uid] = st
}

func allContainersRunning(pod *v1.Pod) bool {
	if len(pod.Spec.Containers) == 0 || len(pod.Status.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}
