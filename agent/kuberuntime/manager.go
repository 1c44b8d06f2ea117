// Package kuberuntime is the runtime manager: it plans (computePodActions, pure) and carries out
// (SyncPod, KillPod) a pod's life through CRI alone. It never learns what runtime is on the other
// end of the socket.
package kuberuntime

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nodelet/nodelet/agent/recorder"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/internal/backoff"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/lifecycle"
)

// Deps are what the manager needs; zero values pick the kubelet's defaults.
type Deps struct {
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Recorder receives pod events (Pulling, Created, Started, Killing, BackOff, Failed). Optional.
	Recorder recorder.Interface
	// Reasons is shared with the status manager: why a container is waiting.
	Reasons *kubecontainer.ReasonCache
	Log     *slog.Logger
	Now     func() time.Time

	// RootDir holds pods/<uid>/volumes (emptyDir volumes), and seccomp/ the Localhost seccomp profiles.
	RootDir string
	// SeccompDefault gives containers without a seccomp profile RuntimeDefault (seccompDefault).
	SeccompDefault bool
	// PodLogsDir is /var/log/pods upstream.
	PodLogsDir string
	// NodeName fills spec.nodeName env references.
	NodeName string
	// NodeIPs fill status.hostIP env references.
	NodeIPs []string
	// DNS is the cluster DNS and the host's resolv.conf, read once at start (no lookups on the sync path).
	DNS DNSConfigurer
	// CgroupRoot is the parent of the QoS cgroups (cgroupfs layout: <root>/<qos>/pod<uid>). Empty
	// leaves cgroup placement to the runtime.
	CgroupRoot string
	// Cgroups are the hierarchies pod cgroups are removed from (nil: this host's).
	Cgroups        *cm.Cgroups
	RuntimeHandler string
	// Volumes locates API-backed volumes (secret, configMap, projected…) prepared before the sync;
	// nil supports only emptyDir and hostPath.
	Volumes VolumePaths
	// EnvData resolves env references to config maps and secrets; nil rejects them.
	EnvData EnvSource
	// RuntimeClasses maps a pod's runtimeClassName to a CRI runtime handler; nil uses the name itself.
	// The agent does not judge the handler: the runtime refuses one it does not have, so a handler
	// configured only in containerd (kata) needs nothing of the agent.
	RuntimeClasses RuntimeClasses
	// Credentials finds registry credentials in the pod's imagePullSecrets; nil pulls anonymously.
	Credentials PullCredentials
	// Probes tells which containers failed their liveness or startup probe; nil means none did.
	Probes ProbeResults
	// Allocation records the resources each container was given, for in-place resize; nil resizes
	// nothing in place (a resources-only change then waits for the container's next start).
	Allocation Allocation
	// PodCgroups resizes pod cgroups with their containers; nil when the runtime places pods.
	PodCgroups PodCgroups
	// ImagePulls configures the image manager (serialized or parallel pulls, the GC's Used hook);
	// Credentials, Recorder and Now are filled in from the fields above.
	ImagePulls images.Options
	// SubPaths makes the bind mounts of volumeMounts' subPath and subPathExpr safely (the volume
	// manager); nil refuses them rather than let the runtime follow a symlink out of the volume.
	SubPaths SubPaths
	// Services gives the Service environment variables (KUBERNETES_SERVICE_HOST…) in a cluster;
	// nil gives none, as a standalone kubelet does.
	Services ServiceLister
	// Allocatable is the node's allocatable resources: what a downward API limits.cpu or
	// limits.memory shows when the container sets no limit. Nil makes such a reference an error.
	Allocatable func() v1.ResourceList
	// CPUs gives each container its cpuset at creation (the CPU manager's static policy); nil
	// leaves it to the runtime.
	CPUs CPUSets
	// Userns gives hostUsers:false pods their user namespace; nil refuses such pods.
	Userns UserNamespaces
	// Devices gives containers the devices allocated to them; nil: no device plugins.
	Devices DeviceOptions
}

// CPUSets places containers on CPUs (*cpumanager.Manager).
type CPUSets interface {
	// CPUSet is the container's cpuset list, "" for the runtime's default.
	CPUSet(pod *v1.Pod, container string) string
	// Created tells which cpuset a new container got, so it is not written again needlessly.
	Created(containerID, cpus string)
}

// VolumePaths finds the host folder of a pod's volume made by the volume manager.
type VolumePaths interface {
	// Path is where an API-backed volume is (read-only in containers).
	Path(pod *v1.Pod, volumeName string) (string, bool)
	// ClaimPath is where a persistentVolumeClaim volume's PV is, and whether the pod claims it
	// read-only.
	ClaimPath(pod *v1.Pod, volumeName string) (path string, readOnly, ok bool)
}

// RuntimeClasses resolves RuntimeClass names: the apiserver's RuntimeClass objects in a cluster, the
// manifest folder's standalone (podsource.RuntimeClassSet).
type RuntimeClasses interface {
	Handler(ctx context.Context, runtimeClassName string) (string, error)
}

// PullCredentials are tried in order for a pull (*credentials.Keyring).
type PullCredentials interface {
	For(ctx context.Context, pod *v1.Pod, image string) []*runtimeapi.AuthConfig
}

// ProbeResults are the prober's verdicts the plan needs.
type ProbeResults interface {
	Unhealthy(containerID string) (bool, string)
}

// probeGracePeriods is what a prober may also answer: the failed probe's own
// terminationGracePeriodSeconds for the kill it causes (*prober.Manager does).
type probeGracePeriods interface {
	KillGracePeriod(containerID string) *int64
}

// SubPaths resolves a volumeMount's subPath inside its volume (*volumemanager.Manager).
type SubPaths interface {
	SubPath(pod *v1.Pod, container string, index int, volume, volumeHostPath, subPath string) (string, error)
}

// EnvSource reads config maps and secrets for env references.
type EnvSource interface {
	ConfigMapData(ctx context.Context, namespace, name string) (map[string]string, error)
	SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// Manager is the runtime manager.
type Manager struct {
	Deps
	crashBackOff *backoff.BackOff
	imageManager *images.Manager
	hooks        *lifecycle.Runner
	handlers     handlerFeatures
}

// NewManager makes a manager.
func NewManager(d Deps) *Manager {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Reasons == nil {
		d.Reasons = kubecontainer.NewReasonCache()
	}
	if d.PodLogsDir == "" {
		d.PodLogsDir = "/var/log/pods"
	}
	if d.Recorder == nil {
		d.Recorder = recorder.Discard{}
	}
	m := &Manager{Deps: d, crashBackOff: backoff.New(backOffInitial, backOffMax, d.Now)}
	o := d.ImagePulls
	if o.Credentials == nil && d.Credentials != nil {
		o.Credentials = d.Credentials
	}
	if o.Recorder == nil {
		o.Recorder = d.Recorder
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	m.imageManager = images.NewManager(d.Images, o)
	m.hooks = &lifecycle.Runner{Exec: d.Runtime}
	return m
}

// GC trims back-off entries that have gone quiet.
func (m *Manager) GC() {
	m.crashBackOff.GC()
	m.imageManager.GC()
}

// GetPodStatus observes one pod through CRI: its sandboxes and every container attempt, newest first.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubecontainer.PodStatus, error) {
	filter := map[string]string{kubecontainer.LabelPodUID: string(uid)}
	sbs, err := m.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{LabelSelector: filter}})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	status := &kubecontainer.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: m.Now()}
	items := sbs.Items
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt > items[j].CreatedAt })
	for i, sb := range items {
		resp, err := m.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("status of sandbox %s: %w", sb.Id, err)
		}
		st := resp.Status
		status.SandboxStatuses = append(status.SandboxStatuses, st)
		if i == 0 && st.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			status.IPs = sandboxIPs(st)
		}
	}
	cs, err := m.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{LabelSelector: filter}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	for _, c := range cs.Containers {
		resp, err := m.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		status.ContainerStatuses = append(status.ContainerStatuses, m.convertContainerStatus(ctx, resp.Status))
	}
	sort.SliceStable(status.ContainerStatuses, func(i, j int) bool {
		a, b := status.ContainerStatuses[i], status.ContainerStatuses[j]
		if a.RestartCount != b.RestartCount {
			return a.RestartCount > b.RestartCount
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	return status, nil
}

func sandboxIPs(st *runtimeapi.PodSandboxStatus) []string {
	var ips []string
	if ip := st.GetNetwork().GetIp(); ip != "" {
		ips = append(ips, ip)
	}
	for _, a := range st.GetNetwork().GetAdditionalIps() {
		if a.GetIp() != "" {
			ips = append(ips, a.GetIp())
		}
	}
	return ips
}

// convertContainerStatus adds to an exited container's status the message it left, after the
// runtime's own message as the kubelet does.
func (m *Manager) convertContainerStatus(ctx context.Context, s *runtimeapi.ContainerStatus) *kubecontainer.Status {
	cs := toContainerStatus(s)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return cs
	}
	if msg := m.terminationMessage(ctx, s, parseContainerLabels(s.Labels, s.Annotations)); msg != "" {
		if cs.Message != "" {
			cs.Message += ": "
		}
		cs.Message += msg
	}
	return cs
}

func toContainerStatus(s *runtimeapi.ContainerStatus) *kubecontainer.Status {
	info := parseContainerLabels(s.Labels, s.Annotations)
	name := info.ContainerName
	if name == "" {
		name = s.GetMetadata().GetName()
	}
	cs := &kubecontainer.Status{
		ID:           s.Id,
		Name:         name,
		State:        kubecontainer.StateFromCRI(s.State),
		CreatedAt:    time.Unix(0, s.CreatedAt),
		ExitCode:     s.ExitCode,
		Image:        s.GetImage().GetImage(),
		ImageID:      s.ImageId,
		ImageRef:     s.ImageRef,
		Hash:         info.Hash,
		RestartCount: info.RestartCount,
		Reason:       s.Reason,
		Message:      s.Message,
		Resources:    toContainerResources(s.Resources),
		User:         toContainerUser(s.User),
	}
	if cs.ImageID == "" {
		cs.ImageID = s.ImageRef
	}
	if s.StartedAt > 0 {
		cs.StartedAt = time.Unix(0, s.StartedAt)
	}
	if s.FinishedAt > 0 {
		cs.FinishedAt = time.Unix(0, s.FinishedAt)
	}
	return cs
}

// GetPods lists every pod the runtime holds that carries the agent's labels. Housekeeping compares it
// with the desired pods to find orphans.
func (m *Manager) GetPods(ctx context.Context) ([]*kubecontainer.RuntimePod, error) {
	sbs, err := m.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := m.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	pods := map[types.UID]*kubecontainer.RuntimePod{}
	get := func(labels map[string]string) *kubecontainer.RuntimePod {
		uid := types.UID(labels[kubecontainer.LabelPodUID])
		if uid == "" {
			return nil
		}
		p := pods[uid]
		if p == nil {
			p = &kubecontainer.RuntimePod{ID: uid, Name: labels[kubecontainer.LabelPodName], Namespace: labels[kubecontainer.LabelPodNamespace]}
			pods[uid] = p
		}
		return p
	}
	for _, sb := range sbs.Items {
		if p := get(sb.Labels); p != nil {
			p.SandboxIDs = append(p.SandboxIDs, sb.Id)
		}
	}
	for _, c := range cs.Containers {
		if p := get(c.Labels); p != nil {
			p.Containers = append(p.Containers, kubecontainer.RuntimeContainer{
				ID: c.Id, Name: c.Labels[kubecontainer.LabelContainerName], State: kubecontainer.StateFromCRI(c.State)})
		}
	}
	out := make([]*kubecontainer.RuntimePod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
