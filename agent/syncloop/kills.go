package syncloop

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/podworkers"
)

// eviction is a pod the eviction manager stops.
type eviction struct {
	pod         *v1.Pod
	gracePeriod int64
	message     string
}

// Kills carries kills asked outside the pod sources (the eviction manager's) to the loop, which
// hands them to the pod workers like every other wake-up. Any goroutine may send; a sender never
// blocks, so the eviction manager cannot hang on a loop that stopped. Made before the loop, as
// the parts that send are built before it.
type Kills struct {
	mu      sync.Mutex
	pending []eviction
	wake    chan struct{}
}

// NewKills makes an empty queue.
func NewKills() *Kills { return &Kills{wake: make(chan struct{}, 1)} }

// Evict stops pod the way an active deadline does: its worker kills it (without deleting it) with
// the grace period, and its status ends Failed, reason Evicted, with message (eviction.KillFunc).
func (k *Kills) Evict(pod *v1.Pod, gracePeriod int64, message string) error {
	k.mu.Lock()
	k.pending = append(k.pending, eviction{pod: pod, gracePeriod: gracePeriod, message: message})
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
	return nil
}

// woken is nil for no queue, so the loop's select never picks it.
func (k *Kills) woken() <-chan struct{} {
	if k == nil {
		return nil
	}
	return k.wake
}

func (k *Kills) take() []eviction {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.pending
	k.pending = nil
	return out
}

// EvictionMarker makes an evicted pod's statuses say so (*podsync.Syncer).
type EvictionMarker interface {
	MarkEvicted(uid types.UID, message string)
}

// handleKills marks each pod evicted before its worker hears of the kill, so the status the kill
// produces is already the evicted one.
func (l *SyncLoop) handleKills() {
	for _, e := range l.Kills.take() {
		if l.Evicted != nil {
			l.Evicted.MarkEvicted(e.pod.UID, e.message)
		}
		grace := e.gracePeriod
		l.Workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: e.pod,
			GracePeriodOverride: &grace, Evict: true})
	}
}
