// Package prober runs the containers' startup, readiness and liveness probes, one goroutine per
// probe of a running container, and keeps their results: readiness feeds the pod's Ready condition,
// a failed liveness (or startup) probe makes the runtime manager restart the container.
package prober

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/nodelet/nodelet/agent/container"
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

// Manager owns the probe workers and their results.
type Manager struct {
	ctx     context.Context
	runtime runtimeapi.RuntimeServiceClient
	// OnChange is called with the pod's UID when a result flips, so its worker syncs at once.
	onChange func(types.UID)
	log      *slog.Logger

	mu      sync.Mutex
	workers map[key]*worker
	results map[string]map[ProbeType]Result // container ID → results
}

// New makes a manager; its workers stop when ctx ends.
func New(ctx context.Context, runtime runtimeapi.RuntimeServiceClient, onChange func(types.UID), log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	if onChange == nil {
		onChange = func(types.UID) {}
	}
	return &Manager{ctx: ctx, runtime: runtime, onChange: onChange, log: log, workers: map[key]*worker{}, results: map[string]map[ProbeType]Result{}}
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
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
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
			w := &worker{m: m, key: k, probe: p, containerID: cs.ID, startedAt: cs.StartedAt, pod: pod, ips: ps.IPs, cancel: cancel}
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

func (m *Manager) set(k key, containerID string, r Result) {
	m.mu.Lock()
	if m.results[containerID] == nil {
		m.results[containerID] = map[ProbeType]Result{}
	}
	old := m.results[containerID][k.probe]
	m.results[containerID][k.probe] = r
	m.mu.Unlock()
	if old != r {
		m.onChange(k.pod)
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
	for {
		if w.key.probe != Startup || !w.passedStartup() {
			// Liveness and readiness wait for a startup probe to pass.
			if w.key.probe == Startup || w.startupDone() {
				err := w.once(ctx)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					okRun, failRun = okRun+1, 0
					if okRun >= success {
						w.m.set(w.key, w.containerID, Success)
					}
				} else {
					okRun, failRun = 0, failRun+1
					w.m.log.Debug("probe failed", "pod", w.pod.Namespace+"/"+w.pod.Name, "container", w.key.container, "probe", w.key.probe, "err", err)
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
		}
	}
}

func (w *worker) passedStartup() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.results[w.containerID][Startup] == Success
}

func (w *worker) startupDone() bool {
	for i := range w.pod.Spec.Containers {
		c := &w.pod.Spec.Containers[i]
		if c.Name == w.key.container && c.StartupProbe != nil {
			return w.passedStartup()
		}
	}
	return true
}

// once runs the probe a single time.
func (w *worker) once(ctx context.Context) error {
	p := w.probe
	timeout := seconds(p.TimeoutSeconds, 1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := "127.0.0.1"
	if len(w.ips) > 0 {
		host = w.ips[0]
	}
	switch {
	case p.Exec != nil:
		r, err := w.m.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: w.containerID, Cmd: p.Exec.Command,
			Timeout: int64(timeout / time.Second)})
		if err != nil {
			return err
		}
		if r.ExitCode != 0 {
			return fmt.Errorf("exit code %d: %s", r.ExitCode, r.Stdout)
		}
		return nil
	case p.HTTPGet != nil:
		g := p.HTTPGet
		if g.Host != "" {
			host = g.Host
		}
		port, err := w.port(g.Port)
		if err != nil {
			return err
		}
		scheme := "http"
		if g.Scheme == v1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+g.Path, nil)
		if err != nil {
			return err
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		req.Header.Set("User-Agent", "kube-probe/1.36")
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		if p.TCPSocket.Host != "" {
			host = p.TCPSocket.Host
		}
		port, err := w.port(p.TCPSocket.Port)
		if err != nil {
			return err
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("unsupported probe handler (exec, httpGet and tcpSocket are supported)")
}

// probeClient never follows redirects off the pod and keeps no connections, as probes are sparse.
var probeClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

func (w *worker) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, c := range w.pod.Spec.Containers {
		if c.Name != w.key.container {
			continue
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("no port named %q", p.StrVal)
}
