// Package podmanager holds the desired pods as the sources last described them, indexed by UID and by
// full name, and pairs each static pod (from a file or URL) with its mirror pod in the apiserver.
package podmanager

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Annotations the kubelet uses on static and mirror pods.
const (
	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	configHashAnnotation   = "kubernetes.io/config.hash"
)

// IsMirrorPod reports whether pod is the apiserver's mirror of a static pod.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[configMirrorAnnotation]
	return ok
}

// IsStaticPod reports whether pod came from a file or URL.
func IsStaticPod(pod *v1.Pod) bool {
	s := pod.Annotations[configSourceAnnotation]
	return s != "" && s != "api"
}

// Manager is the desired pods.
type Manager struct {
	mu                  sync.RWMutex
	byUID               map[types.UID]*v1.Pod
	byFullName          map[string]*v1.Pod
	mirrorByFullName    map[string]*v1.Pod
	translationByMirror map[types.UID]types.UID
}

// New makes an empty manager.
func New() *Manager {
	return &Manager{byUID: map[types.UID]*v1.Pod{}, byFullName: map[string]*v1.Pod{},
		mirrorByFullName: map[string]*v1.Pod{}, translationByMirror: map[types.UID]types.UID{}}
}

// AddPod records a new or changed pod (mirror pods are kept apart).
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	full := kubecontainer.GetPodFullName(pod)
	if IsMirrorPod(pod) {
		m.mirrorByFullName[full] = pod
		if static, ok := m.byFullName[full]; ok {
			m.translationByMirror[pod.UID] = static.UID
		}
		return
	}
	m.byUID[pod.UID] = pod
	m.byFullName[full] = pod
	if mirror, ok := m.mirrorByFullName[full]; ok {
		m.translationByMirror[mirror.UID] = pod.UID
	}
}

// UpdatePod is AddPod.
func (m *Manager) UpdatePod(pod *v1.Pod) { m.AddPod(pod) }

// RemovePod forgets a pod.
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	full := kubecontainer.GetPodFullName(pod)
	if IsMirrorPod(pod) {
		if cur, ok := m.mirrorByFullName[full]; ok && cur.UID == pod.UID {
			delete(m.mirrorByFullName, full)
		}
		delete(m.translationByMirror, pod.UID)
		return
	}
	delete(m.byUID, pod.UID)
	if cur, ok := m.byFullName[full]; ok && cur.UID == pod.UID {
		delete(m.byFullName, full)
	}
}

// GetPods returns the desired pods, mirrors excluded.
func (m *Manager) GetPods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(m.byUID))
	for _, p := range m.byUID {
		out = append(out, p)
	}
	return out
}

// GetPodByUID finds a pod.
func (m *Manager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byUID[uid]
	return p, ok
}

// GetPodByFullName finds a pod by name_namespace.
func (m *Manager) GetPodByFullName(full string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byFullName[full]
	return p, ok
}

// GetMirrorPodByPod returns the mirror of a static pod.
func (m *Manager) GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.mirrorByFullName[kubecontainer.GetPodFullName(pod)]
	return p, ok
}

// GetPodByMirrorPod returns the static pod a mirror stands for.
func (m *Manager) GetPodByMirrorPod(mirror *v1.Pod) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byFullName[kubecontainer.GetPodFullName(mirror)]
	return p, ok
}

// GetOrphanedMirrorPodNames lists mirrors whose static pod is gone.
func (m *Manager) GetOrphanedMirrorPods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for full, mirror := range m.mirrorByFullName {
		if _, ok := m.byFullName[full]; !ok {
			out = append(out, mirror)
		}
	}
	return out
}

// MirrorMatches reports whether the mirror still describes the static pod (same config hash).
func MirrorMatches(static, mirror *v1.Pod) bool {
	return mirror.Annotations[configMirrorAnnotation] == static.Annotations[configHashAnnotation] && mirror.DeletionTimestamp == nil
}
