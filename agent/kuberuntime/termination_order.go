package kuberuntime

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// terminationOrder holds a pod's sidecars (restartable init containers) back while the pod is
// killed: they serve the app containers (proxies, log shippers), so they get their SIGTERM only
// once every app container has stopped, and one after another in the reverse of the order they
// started, the last-started first. Every container's kill still starts at once: its Killing event
// and its preStop hook do not wait, only the StopContainer call does, and never longer than what is
// left of its grace period.
type terminationOrder struct {
	now func() time.Time

	mu sync.Mutex
	// stopped holds a channel per container being killed, closed once it has stopped.
	stopped map[string]chan struct{}
	// after lists what a container waits for before it is stopped; only sidecars wait.
	after map[string][]chan struct{}
}

// newTerminationOrder sets the order up for the pod's containers, of which those named in running
// are being killed. Nil when the pod has no sidecar: then every container is stopped at once.
func newTerminationOrder(pod *v1.Pod, running map[string]bool, now func() time.Time) *terminationOrder {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	o := &terminationOrder{now: now, stopped: map[string]chan struct{}{}, after: map[string][]chan struct{}{}}
	track := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !running[name] {
			// Nothing to wait for.
			close(ch)
			return ch
		}
		o.stopped[name] = ch
		return ch
	}
	apps := make([]chan struct{}, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		apps = append(apps, track(pod.Spec.Containers[i].Name))
	}
	// From the last init container back: a sidecar waits for the app containers and for the
	// sidecar that started after it.
	var later chan struct{}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := track(c.Name)
		if !IsSidecar(c) {
			continue
		}
		wait := append([]chan struct{}(nil), apps...)
		if later != nil {
			wait = append(wait, later)
		}
		o.after[c.Name] = wait
		later = ch
	}
	return o
}

func hasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// waitForTurn blocks until every container name waits for has stopped, the grace period (seconds)
// has run out, or ctx ends, and returns the whole seconds it waited, which the caller takes off
// the grace period as the kubelet does. Without grace left there is no waiting.
func (o *terminationOrder) waitForTurn(ctx context.Context, name string, grace int64) int64 {
	if o == nil || grace <= 0 || len(o.after[name]) == 0 {
		return 0
	}
	start := o.now()
	timer := time.NewTimer(time.Duration(grace) * time.Second)
	defer timer.Stop()
wait:
	for _, ch := range o.after[name] {
		select {
		case <-ch:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	return int64(o.now().Sub(start).Seconds())
}

// containerStopped lets those waiting for the named container go on.
func (o *terminationOrder) containerStopped(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.stopped[name]; ok {
		close(ch)
		delete(o.stopped, name)
	}
}
