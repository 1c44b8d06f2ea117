package status

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/nodelet/nodelet/agent/kubeclient"
	"github.com/nodelet/nodelet/agent/metrics"
)

// PodGetter finds the API object to write a status to: the pod itself, or for a static pod its mirror.
type PodGetter interface {
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
}

// Annotation the kubelet puts on pods from files and URLs (and their mirrors).
const configSourceAnnotation = "kubernetes.io/config.source"

type entry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	synced  uint64 // version last written to the apiserver
}

// PodClient is the apiserver as the status manager writes to it (a *kubeclient.Client is one).
type PodClient interface {
	Pods(namespace string) kubeclient.PodInterface
}

// Manager keeps pod statuses. Without a client it is a local store only.
type Manager struct {
	client  PodClient
	pods    PodGetter
	log     *slog.Logger
	period  time.Duration
	mu      sync.Mutex
	entries map[types.UID]*entry
	writing sync.Mutex // held by the one SyncBatch that writes at a time
	notify  chan struct{}
}

// NewManager makes a manager; client and pods may be nil for standalone use.
func NewManager(client PodClient, pods PodGetter, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{client: client, pods: pods, log: log, period: 10 * time.Second,
		entries: map[types.UID]*entry{}, notify: make(chan struct{}, 1)}
}

// normalize truncates times to what the API keeps (seconds), so a status read back compares equal.
func normalize(s *v1.PodStatus) {
	r := func(t *metav1.Time) { *t = t.Rfc3339Copy() }
	if s.StartTime != nil {
		t := s.StartTime.Rfc3339Copy()
		s.StartTime = &t
	}
	for i := range s.Conditions {
		r(&s.Conditions[i].LastTransitionTime)
		r(&s.Conditions[i].LastProbeTime)
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			for _, st := range []*v1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if st.Running != nil {
					r(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					r(&st.Terminated.StartedAt)
					r(&st.Terminated.FinishedAt)
				}
			}
		}
	}
}

// SetPodStatus records the status; it reports whether it changed.
func (m *Manager) SetPodStatus(pod *v1.Pod, s v1.PodStatus) bool {
	s = *s.DeepCopy()
	normalize(&s)
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[pod.UID]
	if ok && apiequality.Semantic.DeepEqual(e.status, s) {
		e.pod = pod
		return false
	}
	if !ok {
		e = &entry{}
		m.entries[pod.UID] = e
	}
	e.pod, e.status = pod, s
	e.version++
	observed := *pod
	observed.Status = s
	metrics.PodStarts.ObservedPod(&observed)
	select {
	case m.notify <- struct{}{}:
	default:
	}
	return true
}

// GetPodStatus returns the last status recorded.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// Forget drops one pod's status (it was deleted; a pod re-added with the same UID starts afresh).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, uid)
	metrics.PodStarts.Forget(uid)
}

// RemoveOrphanedStatuses forgets pods that are no longer desired. A final status not yet written
// to the apiserver is kept until it is: a pod rejected at admission is never desired, and its
// Failed status is all its author learns of why.
func (m *Manager) RemoveOrphanedStatuses(desired map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, e := range m.entries {
		final := e.status.Phase == v1.PodFailed || e.status.Phase == v1.PodSucceeded
		if !desired[uid] && !(m.client != nil && final && e.synced != e.version) {
			delete(m.entries, uid)
		}
	}
}

// Run writes changed statuses to the apiserver until ctx ends; without a client it returns at once.
func (m *Manager) Run(ctx context.Context) {
	if m.client == nil {
		return
	}
	t := time.NewTicker(m.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.notify:
		case <-t.C:
		}
		m.SyncBatch(ctx)
	}
}

// SyncBatch patches every status whose version was not written yet. Batches run one at a time
// (Run's and each PodTerminated's), and each write takes the pod's newest status when it starts:
// two writers holding copies of different ages could otherwise land an older status after a newer
// one, a terminal phase turned back to Running on its way to deletion.
func (m *Manager) SyncBatch(ctx context.Context) {
	m.writing.Lock()
	defer m.writing.Unlock()
	m.mu.Lock()
	var uids []types.UID
	for uid, e := range m.entries {
		if e.synced != e.version {
			uids = append(uids, uid)
		}
	}
	m.mu.Unlock()
	for _, uid := range uids {
		m.mu.Lock()
		e, ok := m.entries[uid]
		if !ok || e.synced == e.version {
			m.mu.Unlock()
			continue
		}
		pod, st, version := e.pod, *e.status.DeepCopy(), e.version
		m.mu.Unlock()
		err := m.patch(ctx, pod, st)
		if errors.Is(err, errNoMirrorYet) {
			continue // written once the mirror pod exists; the pod worker creates it
		}
		if err != nil {
			m.log.Warn("patch pod status", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			continue
		}
		m.mu.Lock()
		if e, ok := m.entries[uid]; ok && e.synced < version {
			e.synced = version
		}
		m.mu.Unlock()
	}
}

var errNoMirrorYet = errors.New("no mirror pod yet")

func isStatic(pod *v1.Pod) bool {
	s := pod.Annotations[configSourceAnnotation]
	return s != "" && s != "api"
}

func (m *Manager) patch(ctx context.Context, pod *v1.Pod, s v1.PodStatus) error {
	target := pod
	if isStatic(pod) {
		if m.pods == nil {
			return nil
		}
		mirror, ok := m.pods.GetMirrorPodByPod(pod)
		if !ok {
			return errNoMirrorYet
		}
		target = mirror
	}
	pods := m.client.Pods(target.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// The patch replaces the whole list of conditions, so those others own (readiness gates,
		// DisruptionTarget…) are taken from the object as it is now rather than as it was when the
		// status was made, and the write is made on that version only: a gate a controller set
		// meanwhile is neither lost nor turned back, as the kubelet's status manager keeps them.
		current, err := pods.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.UID != target.UID {
			return nil // replaced by another pod of the same name: not ours to write
		}
		s.Conditions = othersThenOwned(current.Status.Conditions, s.Conditions)
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": target.UID, "resourceVersion": current.ResourceVersion},
			"status":   s,
		})
		if err != nil {
			return err
		}
		_, err = pods.Patch(ctx, target.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // the pod is gone; nothing to report to
	}
	return err
}

// othersThenOwned is the apiserver's conditions of types the agent does not own, with the agent's
// own from its status, in the order Generate keeps.
func othersThenOwned(current, ours []v1.PodCondition) []v1.PodCondition {
	var out []v1.PodCondition
	for _, c := range current {
		if !ownedCondition(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range ours {
		if ownedCondition(c.Type) {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// PodTerminated finishes the deletion of an apiserver pod whose containers are all gone: the
// apiserver waits for the node to confirm with a zero-grace delete before the object disappears.
func (m *Manager) PodTerminated(ctx context.Context, pod *v1.Pod) error {
	if m.client == nil || pod.DeletionTimestamp == nil || isStatic(pod) {
		return nil
	}
	m.SyncBatch(ctx)
	zero := int64(0)
	err := m.client.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
