package podsource

import (
	"context"
	"reflect"
	"sync"

	"github.com/nodelet/nodelet/agent/manifest"
)

// RuntimeClassSet holds the RuntimeClasses of a standalone agent's manifest folder as the folder
// source last read them. The pods of the folder are admitted against them in the same read; the
// manifest URL's pods and the runtime handler lookups at sandbox creation read them from here, so
// every part of the agent sees one set and the folder is read in one place.
type RuntimeClassSet struct {
	mu   sync.Mutex
	rcs  manifest.RuntimeClasses
	gen  uint64 // counts changes, so a source can tell its pods need admitting again
	read chan struct{}
}

// NewRuntimeClassSet returns a set not yet read: its readers wait for the folder source's first read.
func NewRuntimeClassSet() *RuntimeClassSet { return &RuntimeClassSet{read: make(chan struct{})} }

func (s *RuntimeClassSet) store(rcs manifest.RuntimeClasses) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.read:
		if reflect.DeepEqual(s.rcs, rcs) {
			return
		}
	default:
		close(s.read)
	}
	s.rcs = rcs
	s.gen++
}

// get waits for the folder's first read and returns the set and its generation.
func (s *RuntimeClassSet) get(ctx context.Context) (manifest.RuntimeClasses, uint64, error) {
	select {
	case <-s.read:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rcs, s.gen, nil
}

// Handler is the runtime handler of a pod's runtimeClassName (kuberuntime.RuntimeClasses).
func (s *RuntimeClassSet) Handler(ctx context.Context, name string) (string, error) {
	rcs, _, err := s.get(ctx)
	if err != nil {
		return "", err
	}
	return rcs.Handler(name)
}
