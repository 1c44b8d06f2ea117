package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// containerToKill says which container to kill and why.
type containerToKill struct {
	Name    string
	Spec    *v1.Container // nil for a container no longer in the spec
	Message string
	// GracePeriod, when set, replaces the pod's for this kill (a failed probe's own
	// terminationGracePeriodSeconds); a deletion's grace period still wins.
	GracePeriod *int64
	// ForResize: the container restarts to take new resources (its resizePolicy), not because it
	// failed, so its start is not held back by the crash-loop back-off.
	ForResize bool
}

// podActions is the plan SyncPod carries out. It is computed by computePodActions from the desired
// pod and the observed status alone, so every decision is table-tested without a runtime.
type podActions struct {
	// KillPod stops every container and sandbox of the pod first. With CreateSandbox false it is the
	// whole plan: the pod has finished.
	KillPod bool
	// CreateSandbox makes a new sandbox with the given Attempt (the old one died or never existed).
	CreateSandbox bool
	SandboxID     string
	Attempt       uint32
	// NextInitContainerToStart is the one init container to start now (they run one at a time).
	NextInitContainerToStart *v1.Container
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes into pod.Spec.EphemeralContainers: the debug
	// containers that have never run. They run once; an exited one stays exited.
	EphemeralContainersToStart []int
	// ContainersToKill are keyed by container ID.
	ContainersToKill map[string]containerToKill
	// ContainersToUpdate are the running containers whose cpu or memory is resized in place
	// (UpdateContainerResources), by resource, decreases before increases.
	ContainersToUpdate map[v1.ResourceName][]containerToUpdate
	// UpdatePodResources: a container restarts to take new resources, so the pod cgroup is resized
	// before it starts again.
	UpdatePodResources bool
}

func (a podActions) String() string {
	next := ""
	if a.NextInitContainerToStart != nil {
		next = a.NextInitContainerToStart.Name
	}
	return fmt.Sprintf("kill=%v createSandbox=%v sandbox=%q attempt=%d nextInit=%q start=%v ephemeral=%v kill=%d resize=%d/%d updatePod=%v",
		a.KillPod, a.CreateSandbox, a.SandboxID, a.Attempt, next, a.ContainersToStart, a.EphemeralContainersToStart, len(a.ContainersToKill),
		len(a.ContainersToUpdate[v1.ResourceCPU]), len(a.ContainersToUpdate[v1.ResourceMemory]), a.UpdatePodResources)
}

// shouldRestartOnFailure is whether a failed container of the pod runs again.
func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

// containerSucceeded is whether the newest attempt of c exited 0.
func containerSucceeded(c *v1.Container, status *kubecontainer.PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == kubecontainer.StateExited && cs.ExitCode == 0
}

// anyAppContainerCreated reports whether one of the pod's app containers was created, which
// means its initialization completed.
func anyAppContainerCreated(pod *v1.Pod, status *kubecontainer.PodStatus) bool {
	for i := range pod.Spec.Containers {
		if cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name); cs != nil && cs.State != kubecontainer.StateUnknown {
			return true
		}
	}
	return false
}

// shouldContainerBeRestarted applies the restart policy to a container that is not running.
func shouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, status *kubecontainer.PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil || cs.State == kubecontainer.StateCreated || cs.State == kubecontainer.StateUnknown {
		return true
	}
	if cs.State == kubecontainer.StateRunning {
		return false
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return cs.ExitCode != 0
	}
	return true
}

// podSandboxChanged says whether the pod needs a new sandbox, with its attempt number and the ID of
// the sandbox to keep using otherwise.
func podSandboxChanged(pod *v1.Pod, status *kubecontainer.PodStatus) (bool, uint32, string) {
	if len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	next := newest.GetMetadata().GetAttempt() + 1
	if ready > 1 || newest.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, next, newest.Id
	}
	hostNet := newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNet != pod.Spec.HostNetwork {
		return true, next, newest.Id
	}
	return false, newest.GetMetadata().GetAttempt(), newest.Id
}

// IsSidecar reports whether an init container is a sidecar (restartPolicy Always): it starts in
// its turn among the init containers, the next one starts as soon as it runs, and it is restarted
// whenever it stops for as long as the pod runs.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// computeInitContainerActions fills in the init container part of the plan. It reports whether all
// init containers are done (so app containers may start).
func computeInitContainerActions(pod *v1.Pod, status *kubecontainer.PodStatus, probes ProbeResults, actuated actuatedFunc, changes *podActions) bool {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if IsSidecar(c) {
			switch {
			case cs != nil && cs.State == kubecontainer.StateRunning && probes != nil && failedProbe(probes, cs.ID):
				// A sidecar that failed its liveness probe is restarted in place, as the kubelet does.
				_, why := probes.Unhealthy(cs.ID)
				k := containerToKill{Name: c.Name, Spec: c, Message: fmt.Sprintf("container %s %s, will be restarted", c.Name, why)}
				if g, ok := probes.(probeGracePeriods); ok && pod.DeletionTimestamp == nil {
					k.GracePeriod = g.KillGracePeriod(cs.ID)
				}
				changes.ContainersToKill[cs.ID] = k
			case cs != nil && cs.State == kubecontainer.StateRunning:
				if computePodResizeAction(c, cs, actuated, changes) {
					continue
				}
				// Its resizePolicy restarts it for its new resources: killed in the plan, started below.
			case cs != nil && cs.State == kubecontainer.StateUnknown:
				changes.ContainersToKill[cs.ID] = containerToKill{Name: c.Name, Spec: c, Message: "sidecar is in an unknown state"}
			}
			// Not started yet, or stopped: (re)start it before anything after it.
			changes.NextInitContainerToStart = c
			return false
		}
		switch {
		case cs == nil:
			changes.NextInitContainerToStart = c
			return false
		case cs.State == kubecontainer.StateRunning:
			return false
		case cs.State == kubecontainer.StateExited && cs.ExitCode == 0:
			continue
		case cs.State == kubecontainer.StateExited:
			if !shouldRestartOnFailure(pod) {
				changes.KillPod = true
				return false
			}
			changes.NextInitContainerToStart = c
			return false
		default: // created or unknown: it never ran, so it is not done; start it afresh.
			changes.ContainersToKill[cs.ID] = containerToKill{Name: c.Name, Spec: c, Message: "init container is in an unknown state"}
			changes.NextInitContainerToStart = c
			return false
		}
	}
	return true
}

// failedProbe: the prober says the container failed its liveness or startup probe.
func failedProbe(probes ProbeResults, id string) bool {
	bad, _ := probes.Unhealthy(id)
	return bad
}

// computePodActions decides what SyncPod must do to bring the observed pod (as allocated) to the
// desired one. probes may be nil; actuated, nil or not, gives what each container was last given,
// so a container whose allocated cpu or memory differs is resized in place or, as its resizePolicy
// says, restarted (its resources are not in its hash: a resize alone never recreates it).
func computePodActions(pod *v1.Pod, status *kubecontainer.PodStatus, probes ProbeResults, actuated actuatedFunc) podActions {
	createSandbox, attempt, sandboxID := podSandboxChanged(pod, status)
	changes := podActions{
		KillPod:          createSandbox,
		CreateSandbox:    createSandbox,
		SandboxID:        sandboxID,
		Attempt:          attempt,
		ContainersToKill: map[string]containerToKill{},
	}

	if createSandbox {
		// A pod that never restarts and already ran does not get a second sandbox: it is finished.
		if !shouldRestartOnFailure(pod) && attempt != 0 && len(status.ContainerStatuses) != 0 {
			changes.CreateSandbox = false
			return changes
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && containerSucceeded(c, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		// Nothing to start and initialization done (an app container was made): the pod is over,
		// as the kubelet decides it; init containers are not run again for it.
		if len(toStart) == 0 && anyAppContainerCreated(pod, status) {
			changes.CreateSandbox = false
			return changes
		}
		if len(pod.Spec.InitContainers) > 0 {
			// Init containers run again in a new sandbox, from the first.
			changes.NextInitContainerToStart = &pod.Spec.InitContainers[0]
			return changes
		}
		changes.ContainersToStart = toStart
		return changes
	}

	// Before the init containers: a pod stuck in its initialization is exactly what one debugs.
	changes.EphemeralContainersToStart = ephemeralContainersToStart(pod, status)

	if !computeInitContainerActions(pod, status, probes, actuated, &changes) {
		return changes
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.StateRunning {
			if cs != nil && cs.State == kubecontainer.StateUnknown {
				changes.ContainersToKill[cs.ID] = containerToKill{Name: c.Name, Spec: c, Message: "container is in an unknown state"}
			}
			if shouldContainerBeRestarted(c, pod, status) {
				changes.ContainersToStart = append(changes.ContainersToStart, i)
			}
			continue
		}
		if cs.Hash != 0 && cs.Hash != HashContainer(c) {
			changes.ContainersToKill[cs.ID] = containerToKill{Name: c.Name, Spec: c,
				Message: fmt.Sprintf("container %s definition changed, will be restarted", c.Name)}
			changes.ContainersToStart = append(changes.ContainersToStart, i)
			continue
		}
		if probes != nil {
			if bad, why := probes.Unhealthy(cs.ID); bad {
				msg := fmt.Sprintf("container %s %s", c.Name, why)
				if shouldRestartOnFailure(pod) {
					msg += ", will be restarted"
					changes.ContainersToStart = append(changes.ContainersToStart, i)
				}
				k := containerToKill{Name: c.Name, Spec: c, Message: msg}
				if g, ok := probes.(probeGracePeriods); ok && pod.DeletionTimestamp == nil {
					k.GracePeriod = g.KillGracePeriod(cs.ID)
				}
				changes.ContainersToKill[cs.ID] = k
				continue
			}
		}
		if !computePodResizeAction(c, cs, actuated, &changes) {
			changes.ContainersToStart = append(changes.ContainersToStart, i)
			continue
		}
		keep++
	}

	// Running containers that the spec no longer names are killed too.
	names := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		names[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		names[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names[c.Name] = true
	}
	for _, cs := range status.ContainerStatuses {
		if cs.State == kubecontainer.StateRunning && !names[cs.Name] {
			changes.ContainersToKill[cs.ID] = containerToKill{Name: cs.Name, Message: "container is no longer in the pod spec"}
		}
	}

	// A debug container does not keep a pod alive whose own containers have all finished.
	if keep == 0 && len(changes.ContainersToStart) == 0 {
		changes.KillPod = true
	}
	return changes
}
