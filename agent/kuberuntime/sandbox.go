package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm/qos"
	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// podLogsDir is the upstream layout <root>/<namespace>_<name>_<uid>; a namespace, name or UID that
// is not one path element is refused (podpath.ErrUnsafe).
func (m *Manager) podLogsDir(pod *v1.Pod) (string, error) {
	return podpath.LogDir(m.PodLogsDir, pod.Namespace, pod.Name, pod.UID)
}

// Log folders are 0750: logs hold whatever the containers print (tokens, keys), and other users of
// the host have no business reading them. MkdirAll's mode does not touch a folder that exists (one
// made 0755 by an older version), hence the chmod.
const logDirMode = 0o750

func makeLogDir(dir string) error {
	if err := os.MkdirAll(dir, logDirMode); err != nil {
		return err
	}
	return os.Chmod(dir, logDirMode)
}

// podHostname is the sandbox's hostname; a hostNetwork pod shares the node's UTS namespace, where
// runtimes refuse to set one, so it gets none.
func podHostname(pod *v1.Pod) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// qosClass is the class the status manager already recorded, else the one computed from the spec.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return kubecontainer.PodQOSClass(pod)
}

// podCgroupParent is the pod cgroup the agent's QoS manager made with the pod's limits; the UID was
// checked to be one path element with the log folder, so it cannot climb out of the QoS cgroup.
func (m *Manager) podCgroupParent(pod *v1.Pod) string {
	if m.CgroupRoot == "" {
		return ""
	}
	return qos.PodCgroup(m.CgroupRoot, pod)
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// generatePodSandboxConfig translates the pod into the CRI sandbox config.
func (m *Manager) generatePodSandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	logDir, err := m.podLogsDir(pod)
	if err != nil {
		return nil, err
	}
	userns, err := m.podUserns(ctx, pod)
	if err != nil {
		return nil, err
	}
	hostname, err := m.sandboxHostname(pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     hostname,
		LogDirectory: logDir,
		DnsConfig:    m.podDNS(pod),
		Labels:       newSandboxLabels(pod),
		Annotations:  copyMap(pod.Annotations),
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	// The sandbox runs RuntimeDefault whatever the pod's profile, as with the kubelet: the
	// profile is meant for the pod's containers, and one strict enough for them may not let the
	// runtime's pod process (a pause container) run at all.
	lsc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod),
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}
	lsc.NamespaceOptions.UsernsOptions = userns
	lsc.SupplementalGroupsPolicy = podSupplementalGroupsPolicy(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			lsc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			lsc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		lsc.SupplementalGroups = append(lsc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			lsc.SupplementalGroups = append(lsc.SupplementalGroups, *psc.FSGroup)
		}
		lsc.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
	}
	for _, c := range pod.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			lsc.Privileged = true
		}
	}
	linux := &runtimeapi.LinuxPodSandboxConfig{CgroupParent: m.podCgroupParent(pod), SecurityContext: lsc}
	linux.Resources, linux.Overhead = sandboxResources(pod)
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		linux.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			// The slash form (kernel/shm_rmid_forced) is the API's too; runtimes take the dotted one.
			linux.Sysctls[utilsysctl.NormalizeName(s.Name)] = s.Value
		}
	}
	cfg.Linux = linux
	return cfg, nil
}

func copyMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// createPodSandbox makes the pod's log directory and runs its sandbox.
func (m *Manager) createPodSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg, err := m.generatePodSandboxConfig(ctx, pod, attempt)
	if err != nil {
		return "", nil, err
	}
	if err := makeLogDir(cfg.LogDirectory); err != nil {
		return "", nil, fmt.Errorf("create pod log directory: %w", err)
	}
	handler, err := m.runtimeHandler(ctx, pod)
	if err != nil {
		return "", nil, err
	}
	resp, err := m.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	metrics.PodStarted(err)
	if err != nil {
		return "", nil, fmt.Errorf("run pod sandbox: %w", err)
	}
	return resp.PodSandboxId, cfg, nil
}

// runtimeHandler is the CRI handler for the pod: its RuntimeClass's, else the agent's default.
func (m *Manager) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return m.RuntimeHandler, nil
	}
	if m.RuntimeClasses == nil {
		return *name, nil
	}
	// The error goes out as it is: the kubelet's event names the RuntimeClass only through it
	// (`runtimeclass.node.k8s.io "x" not found`).
	return m.RuntimeClasses.Handler(ctx, *name)
}
