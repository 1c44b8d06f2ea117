package kuberuntime

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// orderPod: inits named with a "side-" prefix are sidecars.
func orderPod(inits []string, apps ...string) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, inits, apps...)
	always := v1.ContainerRestartPolicyAlways
	for i := range pod.Spec.InitContainers {
		if strings.HasPrefix(pod.Spec.InitContainers[i].Name, "side-") {
			pod.Spec.InitContainers[i].RestartPolicy = &always
		}
	}
	return pod
}

// TestTerminationOrder kills every running container at once, each stopping as soon as its turn
// comes, and checks that they stop in the expected stages (any order within a stage).
func TestTerminationOrder(t *testing.T) {
	cases := []struct {
		name    string
		pod     *v1.Pod
		running []string
		stages  [][]string
	}{
		{"no sidecar: no order", orderPod([]string{"init"}, "a", "b"), []string{"a", "b"}, nil},
		{"one sidecar after the apps", orderPod([]string{"side-1"}, "a", "b"), []string{"side-1", "a", "b"},
			[][]string{{"a", "b"}, {"side-1"}}},
		{"sidecars in reverse start order", orderPod([]string{"side-1", "side-2", "side-3"}, "a"),
			[]string{"side-1", "side-2", "side-3", "a"}, [][]string{{"a"}, {"side-3"}, {"side-2"}, {"side-1"}}},
		{"a regular init container between them counts for nothing",
			orderPod([]string{"side-1", "init", "side-2"}, "a"), []string{"side-1", "side-2", "a"},
			[][]string{{"a"}, {"side-2"}, {"side-1"}}},
		{"an app that is not running is not waited for", orderPod([]string{"side-1", "side-2"}, "a", "b"),
			[]string{"side-1", "side-2", "b"}, [][]string{{"b"}, {"side-2"}, {"side-1"}}},
		// As with the kubelet, a sidecar waits only for the next one, which stopped long ago here.
		{"a sidecar that is not running breaks the chain", orderPod([]string{"side-1", "side-2", "side-3"}, "a"),
			[]string{"side-1", "side-3", "a"}, [][]string{{"a"}, {"side-1", "side-3"}}},
		{"only sidecars left", orderPod([]string{"side-1", "side-2"}, "a"), []string{"side-1", "side-2"},
			[][]string{{"side-2"}, {"side-1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			running := map[string]bool{}
			for _, n := range tc.running {
				running[n] = true
			}
			o := newTerminationOrder(tc.pod, running, time.Now)
			if tc.stages == nil {
				if o != nil {
					t.Fatalf("an order for a pod without sidecars: %+v", o)
				}
				return
			}
			var mu sync.Mutex
			var got []string
			var wg sync.WaitGroup
			for _, n := range tc.running {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o.waitForTurn(context.Background(), n, 600)
					mu.Lock()
					got = append(got, n)
					mu.Unlock()
					o.containerStopped(n)
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("stuck; stopped so far %q", got)
			}
			rest := got
			for _, stage := range tc.stages {
				if len(rest) < len(stage) {
					t.Fatalf("stopped %q, want stages %q", got, tc.stages)
				}
				head := slices.Clone(rest[:len(stage)])
				slices.Sort(head)
				if want := slices.Sorted(slices.Values(stage)); !slices.Equal(head, want) {
					t.Fatalf("stopped %q, want stages %q", got, tc.stages)
				}
				rest = rest[len(stage):]
			}
		})
	}
}

// A sidecar waits no longer than its grace period, and says how long it waited in whole seconds.
func TestTerminationOrderGraceRunsOut(t *testing.T) {
	pod := orderPod([]string{"side-1"}, "a")
	o := newTerminationOrder(pod, map[string]bool{"side-1": true, "a": true}, time.Now)
	if waited := o.waitForTurn(context.Background(), "side-1", 1); waited != 1 {
		t.Fatalf("waited %ds for an app that never stops, want the 1s grace period", waited)
	}
	if waited := o.waitForTurn(context.Background(), "side-1", 0); waited != 0 {
		t.Fatalf("waited %ds without grace", waited)
	}
	// Apps do not wait.
	if waited := o.waitForTurn(context.Background(), "a", 30); waited != 0 {
		t.Fatalf("app waited %ds", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waited := o.waitForTurn(ctx, "side-1", 600); waited != 0 {
		t.Fatalf("waited %ds after the context ended", waited)
	}
}
