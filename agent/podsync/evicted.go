package podsync

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonEvicted is the reason of a pod the eviction manager stopped, as the kubelet writes it.
const ReasonEvicted = "Evicted"

// MarkEvicted records that the pod is being evicted with message: from its next status on (the
// one its termination publishes first) it is Failed with reason Evicted, whatever its containers'
// exits say. The eviction manager then kills it through its pod worker.
func (s *Syncer) MarkEvicted(uid types.UID, message string) {
	s.evictedMu.Lock()
	defer s.evictedMu.Unlock()
	if s.evicted == nil {
		s.evicted = map[types.UID]string{}
	}
	s.evicted[uid] = message
}

func (s *Syncer) evictionMessage(uid types.UID) (string, bool) {
	s.evictedMu.Lock()
	defer s.evictedMu.Unlock()
	m, ok := s.evicted[uid]
	return m, ok
}

func (s *Syncer) forgetEviction(uid types.UID) {
	s.evictedMu.Lock()
	defer s.evictedMu.Unlock()
	delete(s.evicted, uid)
}

// enforceEviction fails st for a pod marked evicted, unless it had already ended otherwise.
func (s *Syncer) enforceEviction(pod *v1.Pod, old v1.PodStatus, st *v1.PodStatus) {
	msg, ok := s.evictionMessage(pod.UID)
	if !ok || (terminal(old.Phase) && old.Reason != ReasonEvicted) {
		return
	}
	st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonEvicted, msg
}
