package kuberuntime

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// handlerRefresh is how long the runtime's list of handlers is trusted before it is asked again:
// the kubelet's runtime state is refreshed by its runtime check every 5 s.
const handlerRefresh = 5 * time.Second

// handlerFeatures is the runtime handlers' recursive read-only support, and the runtime's own
// features, as the runtime's Status last listed them. Its zero value is ready: nothing is known
// and the first question asks the runtime.
type handlerFeatures struct {
	mu   sync.Mutex
	read time.Time
	rro  map[string]bool // by handler name; nil until a Status listed handlers
	// runtime are the runtime's features besides its handlers'; nil until a Status answered.
	runtime *runtimeapi.RuntimeFeatures
}

// refreshHandlers asks the runtime's Status again when the last answer is older than
// handlerRefresh (failed or not); a failed Status keeps what the last one said. h.mu is held.
func (m *Manager) refreshHandlers(ctx context.Context) {
	h := &m.handlers
	now := m.Now()
	if !h.read.IsZero() && now.Sub(h.read) < handlerRefresh {
		return
	}
	h.read = now
	st, err := m.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		m.Log.Warn("runtime status for its handlers' features", "err", err)
		return
	}
	h.rro = map[string]bool{}
	for _, rh := range st.GetRuntimeHandlers() {
		h.rro[rh.GetName()] = rh.GetFeatures().GetRecursiveReadOnlyMounts()
	}
	h.runtime = st.GetFeatures()
	if h.runtime == nil {
		h.runtime = &runtimeapi.RuntimeFeatures{}
	}
}

// runtimeFeatures are the features the runtime's Status last reported (nil: none known).
func (m *Manager) runtimeFeatures(ctx context.Context) *runtimeapi.RuntimeFeatures {
	h := &m.handlers
	h.mu.Lock()
	defer h.mu.Unlock()
	m.refreshHandlers(ctx)
	return h.runtime
}

// handlerSupportsRRO asks the runtime's Status (at most every handlerRefresh) whether handler
// takes recursive read-only mounts. A runtime that lists no handlers, or not this one, takes none,
// as the kubelet judges it.
func (m *Manager) handlerSupportsRRO(ctx context.Context, handler string) bool {
	h := &m.handlers
	h.mu.Lock()
	defer h.mu.Unlock()
	m.refreshHandlers(ctx)
	supported, known := h.rro[handler]
	if !known && len(h.rro) > 0 {
		m.Log.Error("Unknown runtime handler", "runtimeHandlerName", handler)
	}
	return supported
}

// SupportsRecursiveReadOnlyMounts reports whether the pod's runtime handler (its RuntimeClass's, or
// the default) takes recursive read-only mounts. Only a pod that asks for one on a read-only mount
// needs the answer; for any other the runtime is not asked.
func (m *Manager) SupportsRecursiveReadOnlyMounts(ctx context.Context, pod *v1.Pod) bool {
	if !podWantsRRO(pod) {
		return false
	}
	return m.podSupportsRRO(ctx, pod)
}

func (m *Manager) podSupportsRRO(ctx context.Context, pod *v1.Pod) bool {
	handler, err := m.runtimeHandler(ctx, pod)
	if err != nil {
		m.Log.Error("look up the runtime handler", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return false
	}
	return m.handlerSupportsRRO(ctx, handler)
}

func podWantsRRO(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, vm := range cs[i].VolumeMounts {
				if kubecontainer.WantsRecursiveReadOnly(vm) {
					return true
				}
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		for _, vm := range pod.Spec.EphemeralContainers[i].VolumeMounts {
			if kubecontainer.WantsRecursiveReadOnly(vm) {
				return true
			}
		}
	}
	return false
}

// recursiveReadOnly resolves one volume mount of the pod for its CRI Mount, with the kubelet's error.
func (m *Manager) recursiveReadOnly(ctx context.Context, pod *v1.Pod, vm v1.VolumeMount) (bool, error) {
	supported := false
	if kubecontainer.WantsRecursiveReadOnly(vm) && (vm.MountPropagation == nil || *vm.MountPropagation == v1.MountPropagationNone) {
		supported = m.podSupportsRRO(ctx, pod)
	}
	rro, err := kubecontainer.ResolveRecursiveReadOnly(vm, supported)
	if err != nil {
		return false, fmt.Errorf("failed to resolve recursive read-only mode: %w", err)
	}
	return rro, nil
}
