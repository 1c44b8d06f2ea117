package kuberuntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/podvalidation"
)

// ephemeralContainersToStart lists the debug containers the runtime has never seen. Whether one
// ran is read from the runtime's containers by name, and only that: an exited debug container is
// kept (pruning keeps each name's newest attempt), so it is never started a second time, and a
// changed spec cannot restart one because the API server never lets it change.
func ephemeralContainersToStart(pod *v1.Pod, status *kubecontainer.PodStatus) []int {
	var out []int
	for i := range pod.Spec.EphemeralContainers {
		if status.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			out = append(out, i)
		}
	}
	return out
}

// ephemeralSpec is the debug container as the Container it is run as: the two share their fields.
func ephemeralSpec(ec *v1.EphemeralContainer) *v1.Container {
	return (*v1.Container)(&ec.EphemeralContainerCommon)
}

func isEphemeral(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return true
		}
	}
	return false
}

// startEphemeral starts spec.EphemeralContainers[i]. One that the API server should not have let
// through is refused with an event rather than half-run; one whose target has not started yet
// waits, as the target's process namespace is what the user asked to see.
func (m *Manager) startEphemeral(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig,
	pod *v1.Pod, i int, status *kubecontainer.PodStatus, podIPs []string) error {
	ec := &pod.Spec.EphemeralContainers[i]
	c := ephemeralSpec(ec)
	if errs := podvalidation.ValidateEphemeralContainer(&pod.Spec, i, field.NewPath("spec", "ephemeralContainers").Index(i)); len(errs) > 0 {
		err := &configGenError{fmt.Errorf("invalid ephemeral container: %w", errs.ToAggregate())}
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		m.Reasons.Update(pod.UID, c.Name, err)
		return fmt.Errorf("start ephemeral container %s: %w", c.Name, err)
	}
	target := ""
	if ec.TargetContainerName != "" {
		cs := status.FindContainerStatusByName(ec.TargetContainerName)
		if cs == nil {
			err := &configGenError{fmt.Errorf("unable to find target container %s", ec.TargetContainerName)}
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
			m.Reasons.Update(pod.UID, c.Name, err)
			return fmt.Errorf("start ephemeral container %s: %w", c.Name, err)
		}
		target = cs.ID
	}
	err := m.startContainerTargeting(ctx, sandboxID, sandboxCfg, pod, c, status, podIPs, target)
	m.Reasons.Update(pod.UID, c.Name, err)
	if err != nil {
		return fmt.Errorf("start ephemeral container %s: %w", c.Name, err)
	}
	return nil
}

// targetPIDNamespace puts the container into the target container's process namespace. Only a
// container that would otherwise get its own: with a shared pod namespace or the host's, the
// target's processes are visible already and that choice of the pod's stands.
func targetPIDNamespace(cfg *runtimeapi.ContainerConfig, targetID string) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}
