// Package prober runs the containers' startup, readiness and liveness probes, one goroutine per
// probe of a running container, and keeps their results: readiness feeds the pod's Ready condition,
// a failed liveness (or startup) probe makes the runtime manager restart the container.
package prober

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nodelet/nodelet/agent/recorder"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// ProbeType names a probe.
type ProbeType string

const (
	Startup   ProbeType = "Startup"
	Readiness ProbeType = "Readiness"
	Liveness  ProbeType = "Liveness"
)

// Result of a probe.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

type key struct {
	pod       types.UID
	container string
	probe     ProbeType
}

// Update says a probe's result flipped. The SyncLoop reads them from Updates and wakes the pod's
// worker, as the kubelet's loop reads its liveness, readiness and startup managers' updates: a
// failed liveness probe restarts the container at once, a readiness change reaches the status at once.
type Update struct {
	PodUID      types.UID
	Container   string
	ContainerID string
	Probe       ProbeType
	Result      Result
}

// Manager owns the probe workers and their results.
type Manager struct {
	// ctx is the workers' parent: Run cancels it when its own context ends.
	ctx      context.Context
	stop     context.CancelFunc
	runtime  runtimeapi.RuntimeServiceClient
	recorder recorder.Interface
	log      *slog.Logger
	updates  chan Update

	mu      sync.Mutex
	workers map[key]*worker
	results map[string]map[ProbeType]Result // container ID → results
}

// New makes a manager; recorder receives the Unhealthy events of failed probes (nil drops them).
// Probes start with SyncPod and stop when Run returns.
func New(runtime runtimeapi.RuntimeServiceClient, rec recorder.Interface, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	if rec == nil {
		rec = recorder.Discard{}
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Manager{ctx: ctx, stop: stop, runtime: runtime, recorder: rec, log: log,
		updates: make(chan Update, 32), workers: map[key]*worker{}, results: map[string]map[ProbeType]Result{}}
}

// Updates delivers every flipped result; whoever runs the manager must read it.
func (m *Manager) Updates() <-chan Update { return m.updates }

// Run waits for ctx to end, then stops every probe.
func (m *Manager) Run(ctx context.Context) {
	<-ctx.Done()
	m.stop()
}

func probeOf(c *v1.Container, t ProbeType) *v1.Probe {
	switch t {
	case Startup:
		return c.StartupProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.LivenessProbe
}

// SyncPod starts probe workers for the pod's running containers and stops those of containers that
// are gone or were replaced.
func (m *Manager) SyncPod(pod *v1.Pod, ps *kubecontainer.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := map[key]string{}
	for _, c := range probedContainers(pod) {
		cs := ps.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.StateRunning {
			continue
		}
		for _, t := range []ProbeType{Startup, Readiness, Liveness} {
			p := probeOf(c, t)
			if p == nil {
				continue
			}
			k := key{pod.UID, c.Name, t}
			live[k] = cs.ID
			if w, ok := m.workers[k]; ok && w.containerID == cs.ID {
				continue
			} else if ok {
				w.stop()
			}
			wctx, cancel := context.WithCancel(m.ctx)
			w := &worker{m: m, key: k, probe: p, containerID: cs.ID, startedAt: cs.StartedAt, pod: pod, ips: ps.IPs, cancel: cancel,
				trigger: make(chan struct{}, 1)}
			m.workers[k] = w
			go w.run(wctx)
		}
	}
	for k, w := range m.workers {
		if _, ok := live[k]; k.pod == pod.UID && !ok {
			w.stop()
			delete(m.workers, k)
			delete(m.results, w.containerID)
		}
	}
}

// probedContainers are the app containers and the sidecars (restartable init containers), which
// the kubelet probes alike; run-to-completion init containers have no probes.
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func (w *worker) spec() *v1.Container {
	for _, c := range probedContainers(w.pod) {
		if c.Name == w.key.container {
			return c
		}
	}
	return nil
}

// StopLivenessAndStartup stops the liveness and startup probes of a pod being terminated, as the
// kubelet does: a container on its way out is not restarted. Its readiness probes go on until the
// pod is removed, so that a container that stops being ready leaves its Services during the
// grace period.
func (m *Manager) StopLivenessAndStartup(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.pod == uid && k.probe != Readiness {
			w.stop()
			delete(m.workers, k)
		}
	}
}

// RemovePod stops the pod's workers and forgets their results.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.pod == uid {
			w.stop()
			delete(m.workers, k)
			delete(m.results, w.containerID)
		}
	}
}

// Ready reports readiness of a running container: true without a readiness probe, else its last
// result, and never before a startup probe has passed.
func (m *Manager) Ready(c *v1.Container, containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.results[containerID]
	if c.StartupProbe != nil && r[Startup] != Success {
		return false
	}
	if c.ReadinessProbe == nil {
		return true
	}
	return r[Readiness] == Success
}

// Started reports whether a running container has passed its startup probe (true without one).
func (m *Manager) Started(c *v1.Container, containerID string) bool {
	if c.StartupProbe == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[containerID][Startup] == Success
}

// Unhealthy reports whether the container failed its liveness or startup probe and must restart.
func (m *Manager) Unhealthy(containerID string) (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.results[containerID]
	switch {
	case r[Liveness] == Failure:
		return true, "failed liveness probe"
	case r[Startup] == Failure:
		return true, "failed startup probe"
	}
	return false, ""
}

// KillGracePeriod is the terminationGracePeriodSeconds of the liveness or startup probe that failed
// for the container, which replaces the pod's for that kill; nil when the probe sets none.
func (m *Manager) KillGracePeriod(containerID string) *int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.results[containerID]
	for k, w := range m.workers {
		if w.containerID != containerID || r[k.probe] != Failure || k.probe == Readiness {
			continue
		}
		if g := w.probe.TerminationGracePeriodSeconds; g != nil {
			return g
		}
	}
	return nil
}

func (m *Manager) set(k key, containerID string, r Result) {
	m.mu.Lock()
	if m.results[containerID] == nil {
		m.results[containerID] = map[ProbeType]Result{}
	}
	old := m.results[containerID][k.probe]
	m.results[containerID][k.probe] = r
	if k.probe == Startup && r == Success && old != Success {
		// As the kubelet's UpdatePodStatus: a started container that is not ready yet is
		// probed for readiness at once, not up to a whole period later.
		if w, ok := m.workers[key{k.pod, k.container, Readiness}]; ok && w.containerID == containerID {
			select {
			case w.trigger <- struct{}{}:
			default:
			}
		}
	}
	m.mu.Unlock()
	if old == r {
		return
	}
	select {
	case m.updates <- Update{PodUID: k.pod, Container: k.container, ContainerID: containerID, Probe: k.probe, Result: r}:
	case <-m.ctx.Done():
	}
}

type worker struct {
	m           *Manager
	key         key
	probe       *v1.Probe
	containerID string
	startedAt   time.Time
	pod         *v1.Pod
	ips         []string
	cancel      context.CancelFunc
	// trigger runs the probe now rather than at its next period: a readiness probe once the
	// startup probe passed, so that the container is ready as soon as it can be.
	trigger chan struct{}
}

func (w *worker) stop() { w.cancel() }

func seconds(v int32, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func (w *worker) run(ctx context.Context) {
	p := w.probe
	period := seconds(p.PeriodSeconds, 10)
	success, failure := int(p.SuccessThreshold), int(p.FailureThreshold)
	if success <= 0 {
		success = 1
	}
	if failure <= 0 {
		failure = 3
	}
	if d := time.Until(w.startedAt.Add(time.Duration(p.InitialDelaySeconds) * time.Second)); d > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
	var okRun, failRun int
	t := time.NewTicker(period)
	defer t.Stop()
	labels := metrics.ProbeLabels{ProbeType: string(w.key.probe), Container: w.key.container,
		Pod: w.pod.Name, Namespace: w.pod.Namespace, PodUID: string(w.pod.UID)}
	defer metrics.ForgetProbe(labels)
	for {
		if w.key.probe != Startup || !w.passedStartup() {
			// Liveness and readiness wait for a startup probe to pass.
			if w.key.probe == Startup || w.startupDone() {
				began := time.Now()
				warning, err := w.once(ctx)
				if ctx.Err() != nil {
					return
				}
				metrics.ProbeResult(labels, probeResult(err), time.Since(began).Seconds())
				if warning != "" {
					w.m.recorder.Eventf(w.pod, v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", w.key.probe, warning)
				}
				if err == nil {
					okRun, failRun = okRun+1, 0
					if okRun >= success {
						w.m.set(w.key, w.containerID, Success)
					}
				} else {
					okRun, failRun = 0, failRun+1
					w.m.log.Debug("probe failed", "pod", w.pod.Namespace+"/"+w.pod.Name, "container", w.key.container, "probe", w.key.probe, "err", err)
					w.m.recorder.Eventf(w.pod, v1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", w.key.probe, err)
					if failRun >= failure {
						w.m.set(w.key, w.containerID, Failure)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.trigger:
		}
	}
}

func (w *worker) passedStartup() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.results[w.containerID][Startup] == Success
}

func (w *worker) startupDone() bool {
	if c := w.spec(); c != nil && c.StartupProbe != nil {
		return w.passedStartup()
	}
	return true
}

// probeResult names a probe run's result as prober_probe_total does.
func probeResult(err error) string {
	if err != nil {
		return "failed"
	}
	return "successful"
}
