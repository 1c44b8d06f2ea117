package gc

import (
	"context"
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

type fakeRuntime struct {
	pods  []types.UID
	err   error
	calls *int
}

func (f fakeRuntime) GetPods(context.Context) ([]*kubecontainer.RuntimePod, error) {
	if f.calls != nil {
		*f.calls++
	}
	var out []*kubecontainer.RuntimePod
	for _, uid := range f.pods {
		out = append(out, &kubecontainer.RuntimePod{ID: uid})
	}
	return out, f.err
}

// cleanups records which of the candidate pods each cleanup was allowed to remove.
type cleanups struct {
	candidates []types.UID
	dirs, ns   []types.UID
}

func (c *cleanups) CleanupOrphans(keep func(types.UID) bool) ([]types.UID, error) {
	for _, uid := range c.candidates {
		if !keep(uid) {
			c.dirs = append(c.dirs, uid)
		}
	}
	return c.dirs, nil
}

type nsCleanups struct{ c *cleanups }

func (n nsCleanups) CleanupOrphans(keep func(types.UID) bool) error {
	for _, uid := range n.c.candidates {
		if !keep(uid) {
			n.c.ns = append(n.c.ns, uid)
		}
	}
	return nil
}

// A pod's folder and user namespace go only when the pod is gone for good and the runtime holds
// no sandbox of it; with the runtime away nothing goes.
func TestOrphanedPodDirs(t *testing.T) {
	gone := func(uid types.UID) bool { return uid != "wanted" }
	for _, c := range []struct {
		name    string
		runtime fakeRuntime
		want    []types.UID
	}{
		{name: "runtime holds one", runtime: fakeRuntime{pods: []types.UID{"in-runtime"}}, want: []types.UID{"orphan"}},
		{name: "runtime away", runtime: fakeRuntime{err: errors.New("unavailable")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := &cleanups{candidates: []types.UID{"wanted", "in-runtime", "orphan"}}
			r := New(Periods{}, Deps{Runtime: c.runtime, PodDirs: cl, Userns: nsCleanups{cl}, Gone: gone})
			r.cleanupOrphanedPodDirs(context.Background())
			if !slices.Equal(cl.dirs, c.want) || !slices.Equal(cl.ns, c.want) {
				t.Errorf("removed folders %v, user namespaces %v; want %v", cl.dirs, cl.ns, c.want)
			}
		})
	}
}

// While every pod with a folder or a user namespace lives, housekeeping never lists the runtime's
// pods; once one is gone, one pass lists them once.
func TestOrphanedPodDirsListsTheRuntimeOnlyForGonePods(t *testing.T) {
	calls := 0
	gone := map[types.UID]bool{}
	cl := &cleanups{candidates: []types.UID{"a", "b"}}
	r := New(Periods{}, Deps{Runtime: fakeRuntime{calls: &calls}, PodDirs: cl, Userns: nsCleanups{cl},
		Gone: func(uid types.UID) bool { return gone[uid] }})
	r.cleanupOrphanedPodDirs(context.Background())
	if calls != 0 || len(cl.dirs) != 0 {
		t.Fatalf("all pods live: runtime listed %d times, removed %v", calls, cl.dirs)
	}
	gone["a"], gone["b"] = true, true
	r.cleanupOrphanedPodDirs(context.Background())
	if calls != 1 || !slices.Equal(cl.dirs, []types.UID{"a", "b"}) {
		t.Fatalf("two pods gone: runtime listed %d times, removed %v", calls, cl.dirs)
	}
}
