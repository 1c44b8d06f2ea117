package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// The checkpoint files under the root dir, named as the kubelet names its own (our format is not
// the kubelet's: a kubelet's file is not read, and ours is not meant for a kubelet).
const (
	allocatedStateFile = "allocated_pods_state"
	actuatedStateFile  = "actuated_pods_state"
	stateVersion       = 1
)

// podResources are one pod's container resources by container name.
type podResources map[string]v1.ResourceRequirements

// stateFile is what a checkpoint holds.
type stateFile struct {
	Version int                        `json:"version"`
	Pods    map[types.UID]podResources `json:"pods"`
}

// store keeps container resources by pod, in memory and in one file rewritten atomically (write,
// fsync, rename, fsync of the folder) on every change, so a restarted agent finds what it had.
// Memory is the truth while the agent runs: a write that fails is reported and done again, with
// everything, at the next change. An empty path keeps them in memory only.
type store struct {
	path string
	mu   sync.RWMutex
	pods map[types.UID]podResources
}

// maxStateSize bounds what is read of the checkpoint: a few hundred bytes per container.
const maxStateSize = 16 << 20

// errCorrupt: the checkpoint could not be read back; the caller starts afresh.
var errCorrupt = errors.New("corrupt checkpoint")

// openStore reads the checkpoint at path, if any. A file that cannot be decoded gives an empty
// store and errCorrupt, so the agent still starts (pods are re-admitted with their specs).
func openStore(path string) (*store, error) {
	s := &store{path: path, pods: map[types.UID]podResources{}}
	if path == "" {
		return s, nil
	}
	b, err := regularfile.Read(path, maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != stateVersion {
		return s, fmt.Errorf("%s: %w (version %d, %v)", path, errCorrupt, f.Version, err)
	}
	for uid, p := range f.Pods {
		if p != nil {
			s.pods[uid] = p
		}
	}
	return s, nil
}

// container returns the resources recorded for one container.
func (s *store) container(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.pods[uid][name]
	if !ok {
		return v1.ResourceRequirements{}, false
	}
	return *r.DeepCopy(), true
}

// pod returns a copy of what is recorded for the pod.
func (s *store) pod(uid types.UID) (podResources, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[uid]
	if !ok {
		return nil, false
	}
	out := make(podResources, len(p))
	for n, r := range p {
		out[n] = *r.DeepCopy()
	}
	return out, true
}

// setPod replaces what is recorded for the pod.
func (s *store) setPod(uid types.UID, p podResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.pods[uid]; ok && apiequality.Semantic.DeepEqual(old, p) {
		return nil
	}
	s.pods[uid] = p
	return s.saveLocked()
}

// setContainer records one container's resources.
func (s *store) setContainer(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pods[uid]
	if old, ok := p[name]; ok && apiequality.Semantic.DeepEqual(old, r) {
		return nil
	}
	if p == nil {
		p = podResources{}
		s.pods[uid] = p
	}
	p[name] = *r.DeepCopy()
	return s.saveLocked()
}

// fillPod records the containers of p the pod has no record of yet.
func (s *store) fillPod(uid types.UID, p podResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.pods[uid]
	changed := false
	for name, r := range p {
		if _, ok := cur[name]; ok {
			continue
		}
		if cur == nil {
			cur = podResources{}
			s.pods[uid] = cur
		}
		cur[name] = *r.DeepCopy()
		changed = true
	}
	if !changed {
		return nil
	}
	return s.saveLocked()
}

// removeExcept forgets the pods keep refuses.
func (s *store) removeExcept(keep func(types.UID) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for uid := range s.pods {
		if !keep(uid) {
			delete(s.pods, uid)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.saveLocked()
}

func (s *store) saveLocked() error {
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(stateFile{Version: stateVersion, Pods: s.pods})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return err
	}
	return atomicfile.Write(s.path, b, 0o600)
}
