package allocation

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// State is what the agent gave each pod (allocated) and what the runtime was last given for each
// container (actuated), checkpointed under the root dir. It stands apart from the Manager, which
// decides admissions and resizes with it, so that the parts that only read allocations (the
// eviction manager ranks pods by them) can be built before admission, which the Manager needs.
type State struct {
	allocated *store
	actuated  *store
}

// OpenState opens the checkpoints under rootDir (empty: in memory only). A checkpoint that cannot
// be read is logged and started afresh: its pods are admitted again with their specs.
func OpenState(rootDir string, log *slog.Logger) (*State, error) {
	if log == nil {
		log = slog.Default()
	}
	st := &State{}
	for _, f := range []struct {
		to   **store
		file string
	}{{&st.allocated, allocatedStateFile}, {&st.actuated, actuatedStateFile}} {
		path := ""
		if rootDir != "" {
			path = filepath.Join(rootDir, f.file)
		}
		var err error
		*f.to, err = openStore(path)
		if errors.Is(err, errCorrupt) {
			log.Warn("pod resource checkpoint unreadable, starting afresh", "err", err)
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("pod resource checkpoint: %w", err)
		}
	}
	return st, nil
}

// withResources returns pod with the containers' resources replaced by those in res, and whether
// any differed; pod itself is copied only then.
func withResources(pod *v1.Pod, res podResources) (*v1.Pod, bool) {
	differs := false
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if r, ok := res[list[i].Name]; ok && !apiequality.Semantic.DeepEqual(list[i].Resources, r) {
				differs = true
			}
		}
	}
	if !differs {
		return pod, false
	}
	pod = pod.DeepCopy()
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if r, ok := res[list[i].Name]; ok {
				list[i].Resources = *r.DeepCopy()
			}
		}
	}
	return pod, true
}

// UpdatePodFromAllocation returns the pod as allocated (its spec's resources replaced by the
// allocation) and whether the allocation differs from the spec. A pod without an allocation is
// returned as it is.
func (s *State) UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	if pod == nil {
		return nil, false
	}
	alloc, ok := s.allocated.pod(pod.UID)
	if !ok {
		return pod, false
	}
	return withResources(pod, alloc)
}

// ActuatedPod returns the pod with each container's resources as last given to the runtime (those
// never given keep the spec's): what the pod's cgroup holds.
func (s *State) ActuatedPod(pod *v1.Pod) *v1.Pod {
	act, ok := s.actuated.pod(pod.UID)
	if !ok {
		return pod
	}
	p, _ := withResources(pod, act)
	return p
}

// AllocatedPods returns the pods as allocated.
func (s *State) AllocatedPods(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		a, _ := s.UpdatePodFromAllocation(p)
		out = append(out, a)
	}
	return out
}

// SetActuatedResources records what the runtime was given for container c of the (allocated) pod.
func (s *State) SetActuatedResources(pod *v1.Pod, c *v1.Container) error {
	return s.actuated.setContainer(pod.UID, c.Name, c.Resources)
}

// ActuatedResources returns what the runtime was last given for the container.
func (s *State) ActuatedResources(uid types.UID, container string) (v1.ResourceRequirements, bool) {
	return s.actuated.container(uid, container)
}
