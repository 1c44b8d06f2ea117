package kuberuntime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/lifecycle"
	"github.com/nodelet/nodelet/agent/metrics"
)

// minimumGracePeriod is the kubelet's floor for a kill: a container always gets this long after SIGTERM.
const minimumGracePeriod = 2

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// crashBackOffKey ties a crash loop to the container's spec, so editing the spec starts afresh.
func crashBackOffKey(pod *v1.Pod, c *v1.Container) string {
	return fmt.Sprintf("%s/%s/%x", pod.UID, c.Name, HashContainer(c))
}

// doBackOff says whether the container must wait before it starts again after crashing.
func (m *Manager) doBackOff(pod *v1.Pod, c *v1.Container, status *kubecontainer.PodStatus) (bool, error) {
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil || cs.State != kubecontainer.StateExited || cs.FinishedAt.IsZero() {
		return false, nil
	}
	return m.doBackOffAt(pod, c, cs.FinishedAt)
}

// doBackOffAt applies the crash-loop back-off to a container that stopped at finished.
func (m *Manager) doBackOffAt(pod *v1.Pod, c *v1.Container, finished time.Time) (bool, error) {
	key := crashBackOffKey(pod, c)
	if in, remaining := m.crashBackOff.InBackOffSince(key, finished); in {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", m.crashBackOff.Get(key), c.Name, kubecontainer.FormatPod(pod))
		m.Recorder.Event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+c.Name)
		return true, &RetryAfterError{After: remaining, Err: fmt.Errorf("%s: %w", msg, kubecontainer.ErrCrashLoopBackOff)}
	}
	m.crashBackOff.Next(key, finished)
	return false, nil
}

// RetryAfterError tells the pod worker when syncing again makes sense.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter is the hint the pod worker reads.
func (e *RetryAfterError) RetryAfter() time.Duration { return e.After }

// configGenError: the agent could not make the container's CRI config (a missing config map or
// secret, a rejected subPathExpr, its log folder…), which the status shows as
// CreateContainerConfigError with the cause as the message. CreateContainerError is kept for the
// runtime refusing CreateContainer, so users know which side to look at.
type configGenError struct{ err error }

func (e *configGenError) Error() string { return e.err.Error() }

func (e *configGenError) Unwrap() []error { return []error{kubecontainer.ErrCreateConfig, e.err} }

// containerKind is the kubelet's container_type label of the started-containers metrics.
func containerKind(pod *v1.Pod, c *v1.Container) string {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c || pod.Spec.InitContainers[i].Name == c.Name {
			return "init_container"
		}
	}
	if isEphemeral(pod, c.Name) {
		return "ephemeral_container"
	}
	return "container"
}

// startContainer pulls the image, then creates and starts the container. It returns the reason-
// carrying error (ErrImagePull, CreateContainerConfigError, CreateContainerError…) the status shows.
func (m *Manager) startContainer(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig,
	pod *v1.Pod, c *v1.Container, status *kubecontainer.PodStatus, podIPs []string) error {
	return m.startContainerTargeting(ctx, sandboxID, sandboxCfg, pod, c, status, podIPs, "")
}

// startContainerTargeting is startContainer for a debug container: targetID, when set, is the
// container whose process namespace it joins.
func (m *Manager) startContainerTargeting(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig,
	pod *v1.Pod, c *v1.Container, status *kubecontainer.PodStatus, podIPs []string, targetID string) error {
	// The image volumes first, as the kubelet pulls them before the containers' images.
	imageVols, err := m.pullImageVolumes(ctx, pod, c, sandboxCfg)
	if err != nil {
		return err
	}
	imageRef, err := m.imageManager.EnsureImageExists(ctx, pod, c, sandboxCfg)
	if err != nil {
		return err
	}
	if err := m.verifyRunAsNonRoot(ctx, pod, c, imageRef); err != nil {
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return err
	}
	restartCount := 0
	if cs := status.FindContainerStatusByName(c.Name); cs != nil {
		restartCount = cs.RestartCount + 1
	}
	cfg, err := m.generateContainerConfigWith(ctx, pod, c, restartCount, imageRef, podIPs, imageVols)
	if err != nil {
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return &configGenError{err}
	}
	// The container is made with its allocated resources: they are what it holds from now on.
	if m.Allocation != nil {
		if err := m.Allocation.SetActuatedResources(pod, c); err != nil {
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
			return &configGenError{err}
		}
	}
	targetPIDNamespace(cfg, targetID)
	if m.CPUs != nil {
		cfg.Linux.Resources.CpusetCpus = m.CPUs.CPUSet(pod, c.Name)
	}
	logDir, err := podpath.ContainerLogDir(sandboxCfg.LogDirectory, c.Name)
	if err == nil {
		err = makeLogDir(logDir)
	}
	if err != nil {
		m.removeTerminationMessageFile(pod, c, cfg)
		err = fmt.Errorf("create container log directory for container %s: %w", c.Name, err)
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return &configGenError{err}
	}
	// Once its creation begins a container is created and started to the end, even when the pod
	// is deleted meanwhile, as the kubelet runs its runtime's SyncPod without cancellation: a start
	// cut halfway leaves a container that never ran yet reads as failed (StartError, exit 128).
	// The kill that follows the deletion stops it; the runtime request timeout bounds both calls.
	rctx := context.WithoutCancel(ctx)
	created, err := m.Runtime.CreateContainer(rctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandboxCfg})
	if err != nil {
		metrics.ContainerStarted(containerKind(pod, c), err)
		m.removeTerminationMessageFile(pod, c, cfg)
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return fmt.Errorf("%w: %v", kubecontainer.ErrCreateContainer, err)
	}
	m.Recorder.Eventf(pod, v1.EventTypeNormal, "Created", "Created container %s", c.Name)
	if m.CPUs != nil {
		m.CPUs.Created(created.ContainerId, cfg.Linux.Resources.CpusetCpus)
	}
	_, err = m.Runtime.StartContainer(rctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
	metrics.ContainerStarted(containerKind(pod, c), err)
	if err != nil {
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return fmt.Errorf("%w: %v", kubecontainer.ErrRunContainer, err)
	}
	m.Recorder.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		// As the kubelet: the hook runs to its end before the container counts as started, and a
		// failure kills it so the restart policy decides what comes next.
		ip := ""
		if len(podIPs) > 0 {
			ip = podIPs[0]
		}
		t := lifecycle.Target{ContainerID: created.ContainerId, Container: c, PodIP: ip}
		if err := m.hooks.Run(ctx, t, c.Lifecycle.PostStart); err != nil {
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			if kerr := m.killContainer(ctx, pod, created.ContainerId, c, "FailedPostStartHook", nil, podIPs, nil); kerr != nil {
				m.Log.Warn("kill after failed postStart hook", "pod", kubecontainer.FormatPod(pod), "container", c.Name, "err", kerr)
			}
			return fmt.Errorf("%w: PostStartHookError: %v", kubecontainer.ErrRunContainer, err)
		}
	}
	return nil
}

// gracePeriodFor is the kill's grace period: an override, else the pod's deletion or spec grace
// period, else what the container's annotation recorded; never below the kubelet's minimum.
func gracePeriodFor(pod *v1.Pod, info labeledInfo, override *int64) int64 {
	g := int64(30)
	switch {
	case override != nil:
		g = *override
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	case info.GracePeriod != nil:
		g = *info.GracePeriod
	}
	return g
}

// killContainer runs the preStop hook, waits for its turn in order (a sidecar's, when the pod is
// killed), then stops the container with what is left of the grace period. pod may be nil (an
// orphan found by housekeeping): the labels written at creation stand in for it.
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, containerID string, spec *v1.Container,
	reason string, gracePeriodOverride *int64, podIPs []string, order *terminationOrder) error {
	var info labeledInfo
	resp, err := m.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	switch {
	case isNotFound(err):
		if spec != nil {
			order.containerStopped(spec.Name)
		}
		return nil
	case err != nil:
		return fmt.Errorf("status of container %s: %w", containerID, err)
	}
	info = parseContainerLabels(resp.Status.Labels, resp.Status.Annotations)
	grace := gracePeriodFor(pod, info, gracePeriodOverride)
	preStop := info.PreStop
	if spec != nil && spec.Lifecycle != nil {
		preStop = spec.Lifecycle.PreStop
	}
	if pod != nil {
		m.Recorder.Eventf(pod, v1.EventTypeNormal, "Killing", "Stopping container %s: %s", info.ContainerName, reason)
	}
	if preStop != nil && grace > 0 && resp.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		start := m.Now()
		m.runPreStop(ctx, pod, containerID, spec, preStop, grace, podIPs)
		grace -= int64(m.Now().Sub(start).Seconds())
	}
	grace -= order.waitForTurn(ctx, info.ContainerName, grace)
	if grace < minimumGracePeriod {
		grace = minimumGracePeriod
	}
	if _, err := m.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: grace}); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %s: %w", containerID, err)
	}
	order.containerStopped(info.ContainerName)
	return nil
}

// runPreStop runs the hook bounded by the grace period. A failing hook is reported: the kill goes on.
func (m *Manager) runPreStop(ctx context.Context, pod *v1.Pod, containerID string, spec *v1.Container, h *v1.LifecycleHandler, grace int64, podIPs []string) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	ip := ""
	if len(podIPs) > 0 {
		ip = podIPs[0]
	}
	if err := m.hooks.Run(ctx, lifecycle.Target{ContainerID: containerID, Container: spec, PodIP: ip}, h); err != nil {
		m.Log.Warn("preStop hook failed", "container", containerID, "err", err)
		if pod != nil {
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	}
}

// killContainers kills in parallel, as the pod's containers share one grace period; order, when
// not nil, holds the sidecars back until the app containers have stopped.
func (m *Manager) killContainers(ctx context.Context, pod *v1.Pod, ids map[string]containerToKill, override *int64, podIPs []string, order *terminationOrder) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for id, k := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := override
			if o == nil {
				o = k.GracePeriod
			}
			if err := m.killContainer(ctx, pod, id, k.Spec, k.Message, o, podIPs, order); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
