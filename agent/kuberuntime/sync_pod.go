package kuberuntime

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// SyncPod brings the pod in the runtime to its spec, in steps:
//
//  1. compute the plan (computePodActions);
//  2. kill the pod when its sandbox must be replaced (or it finished), else kill the containers the plan names;
//  3. prune dead container attempts beyond the newest of each name;
//  4. create the sandbox when needed;
//  5. start the ephemeral (debug) containers that never ran;
//  6. resize running containers in place: the pod cgroup's limits raised before the containers'
//     (UpdateContainerResources) and lowered after them, before a container restarted for its
//     resizePolicy starts again;
//  7. start the next init container, if any, and stop there (they run one at a time);
//  8. start the app containers the plan names.
//
// Every step is idempotent: an interrupted sync is simply done again from fresh observations.
// The error carries a waiting reason (kubecontainer.ReasonFor) and maybe a retry hint (RetryAfterError).
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus) error {
	// Step 1.
	plan := computePodActions(pod, status, m.Probes, m.actuatedFor(pod))
	m.Log.Debug("sync pod", "pod", kubecontainer.FormatPod(pod), "plan", plan.String())

	// Step 2.
	if plan.KillPod {
		// Only replacing a sandbox is news: a new pod has none yet, and its first one is not a change.
		if plan.CreateSandbox && plan.SandboxID != "" {
			m.Recorder.Event(pod, v1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		if err := m.KillPod(ctx, pod, status, nil); err != nil {
			return fmt.Errorf("kill pod: %w", err)
		}
		if !plan.CreateSandbox {
			return nil
		}
	} else if len(plan.ContainersToKill) > 0 {
		if err := m.killContainers(ctx, pod, plan.ContainersToKill, nil, status.IPs, nil); err != nil {
			return err
		}
	}

	// Step 3.
	m.pruneDeadContainers(ctx, pod, status)

	// Step 4.
	if err := checkPathNames(pod); err != nil {
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return err
	}
	sandboxID, podIPs := plan.SandboxID, status.IPs
	if plan.CreateSandbox {
		id, _, err := m.createPodSandbox(ctx, pod, plan.Attempt)
		if err != nil {
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return err
		}
		sandboxID = id
		if !pod.Spec.HostNetwork {
			st, err := m.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
			if err != nil {
				return fmt.Errorf("status of new sandbox %s: %w", id, err)
			}
			podIPs = sandboxIPs(st.Status)
		}
	}
	sandboxCfg, err := m.generatePodSandboxConfig(ctx, pod, plan.Attempt)
	if err != nil {
		return err
	}

	// Step 5. Before the init containers, so that an init container failing to start does not
	// keep the user from debugging it. A debug container that fails does not stop the others.
	var errs []error
	for _, i := range plan.EphemeralContainersToStart {
		if err := m.startEphemeral(ctx, sandboxID, sandboxCfg, pod, i, status, podIPs); err != nil {
			errs = append(errs, err)
		}
	}

	// Step 6. A failed resize does not keep containers from starting; the next sync resumes it.
	if len(plan.ContainersToUpdate) > 0 || plan.UpdatePodResources {
		if err := m.doPodResizeAction(ctx, pod, plan); err != nil {
			m.Log.Warn("pod resize", "pod", kubecontainer.FormatPod(pod), "err", err)
			m.Allocation.ResizeFailed(pod, err.Error())
			errs = append(errs, fmt.Errorf("resize: %w", err))
		}
	}

	// Step 7.
	if c := plan.NextInitContainerToStart; c != nil {
		err := m.start(ctx, sandboxID, sandboxCfg, pod, c, status, podIPs)
		if len(errs) == 0 {
			return err
		}
		return errors.Join(append(errs, err)...)
	}

	// Step 8.
	killed := map[string]bool{}
	for _, k := range plan.ContainersToKill {
		killed[k.Name] = !k.ForResize
	}
	for _, i := range plan.ContainersToStart {
		c := &pod.Spec.Containers[i]
		if killed[c.Name] {
			// Killed by this very sync (a failed liveness probe): the observed status still shows it
			// running, so the crash-loop back-off counts from now.
			if wait, err := m.doBackOffAt(pod, c, m.Now()); wait {
				m.Reasons.Update(pod.UID, c.Name, err)
				errs = append(errs, err)
				continue
			}
		}
		if err := m.start(ctx, sandboxID, sandboxCfg, pod, c, status, podIPs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkPathNames refuses a pod whose namespace, name, UID, container or volume names would not be
// one path element of the folders made for it, before anything of it exists. The config sources
// validate pods; this holds when a source misses something.
func checkPathNames(pod *v1.Pod) error {
	if _, err := podpath.LogDir("", pod.Namespace, pod.Name, pod.UID); err != nil {
		return err
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if err := podpath.Element("container name", cs[i].Name); err != nil {
				return err
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if err := podpath.Element("container name", pod.Spec.EphemeralContainers[i].Name); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Volumes {
		if err := podpath.Element("volume name", pod.Spec.Volumes[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// start applies the crash-loop back-off, then starts c; the outcome goes to the reason cache.
func (m *Manager) start(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig,
	pod *v1.Pod, c *v1.Container, status *kubecontainer.PodStatus, podIPs []string) error {
	if wait, err := m.doBackOff(pod, c, status); wait {
		m.Reasons.Update(pod.UID, c.Name, err)
		return err
	}
	err := m.startContainer(ctx, sandboxID, sandboxCfg, pod, c, status, podIPs)
	m.Reasons.Update(pod.UID, c.Name, err)
	if err != nil {
		return fmt.Errorf("start container %s: %w", c.Name, err)
	}
	return nil
}

// KillPod stops every running container of the pod (in parallel, with the grace period and preStop
// hooks; sidecars only after the app containers, see terminationOrder), then every sandbox. pod may
// be nil for an orphan found in the runtime.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, gracePeriodOverride *int64) error {
	toKill := map[string]containerToKill{}
	running := map[string]bool{}
	for _, cs := range status.ContainerStatuses {
		if cs.State != kubecontainer.StateRunning && cs.State != kubecontainer.StateUnknown {
			continue
		}
		k := containerToKill{Name: cs.Name, Message: "pod is being killed"}
		if pod != nil {
			k.Spec = findSpec(pod, cs.Name)
		}
		toKill[cs.ID] = k
		running[cs.Name] = true
	}
	order := newTerminationOrder(pod, running, m.Now)
	if err := m.killContainers(ctx, pod, toKill, gracePeriodOverride, status.IPs, order); err != nil {
		return err
	}
	for _, sb := range status.SandboxStatuses {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if _, err := m.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil && !isNotFound(err) {
			return fmt.Errorf("stop sandbox %s: %w", sb.Id, err)
		}
	}
	return nil
}

// RemovePod removes every container and sandbox of a pod that has terminated, right away rather than
// at a later garbage collection, so a deleted pod leaves nothing behind once its grace period ends.
func (m *Manager) RemovePod(ctx context.Context, status *kubecontainer.PodStatus) error {
	for _, cs := range status.ContainerStatuses {
		if _, err := m.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cs.ID}); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove container %s: %w", cs.ID, err)
		}
	}
	for _, sb := range status.SandboxStatuses {
		if _, err := m.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove sandbox %s: %w", sb.Id, err)
		}
	}
	m.Reasons.Forget(status.ID)
	m.removePodCgroups(status.ID)
	return nil
}

// pruneDeadContainers keeps the newest dead attempt of each container (its exit code feeds lastState
// and the restart count) and removes older ones; it also removes dead sandboxes other than the newest
// (their containers go with them; the new sandbox's containers carry the restart count on).
// Failures are only logged: pruning is tidying, not the sync's purpose.
func (m *Manager) pruneDeadContainers(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus) {
	seen := map[string]int{}
	for _, cs := range status.ContainerStatuses {
		if cs.State != kubecontainer.StateExited {
			continue
		}
		seen[cs.Name]++
		if seen[cs.Name] <= 1 {
			continue
		}
		// With its log: the newest attempt's log is what `logs --previous` shows, older ones go.
		if err := containergc.RemoveContainer(ctx, m.Runtime, cs.ID); err != nil {
			m.Log.Warn("prune container", "pod", kubecontainer.FormatPod(pod), "container", cs.ID, "err", err)
		}
	}
	for i, sb := range status.SandboxStatuses {
		if i == 0 || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if _, err := m.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil && !isNotFound(err) {
			m.Log.Warn("prune sandbox", "pod", kubecontainer.FormatPod(pod), "sandbox", sb.Id, "err", err)
		}
	}
}

func findSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return ephemeralSpec(&pod.Spec.EphemeralContainers[i])
		}
	}
	return nil
}
