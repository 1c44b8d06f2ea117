// Package podsync is what a pod worker does at each step: observe the pod in the runtime, publish its
// status, keep its mirror pod, and ask the runtime manager to act. The workers (package podworkers)
// decide when; the runtime manager (package kuberuntime) decides how.
package podsync

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/status"
)

// Runtime is the runtime manager as the syncer uses it (*kuberuntime.Manager).
type Runtime interface {
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubecontainer.PodStatus, error)
	SyncPod(ctx context.Context, pod *v1.Pod, st *kubecontainer.PodStatus) error
	KillPod(ctx context.Context, pod *v1.Pod, st *kubecontainer.PodStatus, gracePeriodOverride *int64) error
	RemovePod(ctx context.Context, st *kubecontainer.PodStatus) error
}

// StatusManager keeps statuses (*status.Manager).
type StatusManager interface {
	SetPodStatus(pod *v1.Pod, s v1.PodStatus) bool
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
	PodTerminated(ctx context.Context, pod *v1.Pod) error
	TerminatePod(pod *v1.Pod, now time.Time)
	Forget(uid types.UID)
}

// MirrorClient writes mirror pods (*podmanager.MirrorClient); nil without an apiserver.
type MirrorClient interface {
	CreateMirrorPod(ctx context.Context, pod *v1.Pod) error
	DeleteMirrorPod(ctx context.Context, name, namespace string, uid *types.UID) error
}

// Volumes makes a pod's volumes before its containers start and removes them once they are gone
// (*volumemanager.Manager); nil when unused.
type Volumes interface {
	Prepare(ctx context.Context, pod *v1.Pod) error
	// TearDown unmounts what the pod's folder holds (memory emptyDirs, subPath binds) and removes it.
	TearDown(uid types.UID) error
	// TearDownVolumes removes the volumes of a pod that finished but stays (the kubelet's volume
	// manager does so once a pod has terminated); the rest of its folder is kept.
	TearDownVolumes(uid types.UID) error
	Forget(uid types.UID)
}

// Prober runs the containers' probes (*prober.Manager); nil when unused.
type Prober interface {
	SyncPod(pod *v1.Pod, ps *kubecontainer.PodStatus)
	StopLivenessAndStartup(uid types.UID)
	RemovePod(uid types.UID)
	status.ProbeResults
}

// PodCgroups are the pods' cgroups, kept by the agent so they carry the pods' limits over any
// runtime (*qos.Manager); nil when the runtime places pods itself.
type PodCgroups interface {
	// EnsurePod makes the pod's cgroup with its limits before its sandbox does.
	EnsurePod(pod *v1.Pod) error
	// UpdateQoS recomputes the QoS cgroups' shares once a pod stopped counting in them.
	UpdateQoS() error
}

// Allocation keeps the resources pods were granted and decides in-place resizes
// (*allocation.Manager); nil syncs pods as their specs say.
type Allocation interface {
	// HandlePodResourcesResize decides a pending resize and returns the pod as allocated.
	HandlePodResourcesResize(pod *v1.Pod) *v1.Pod
	// UpdatePodFromAllocation returns the pod as allocated, deciding nothing.
	UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool)
	// CheckPodResizeInProgress keeps PodResizeInProgress while the runtime lags the allocation.
	CheckPodResizeInProgress(allocatedPod *v1.Pod, ps *kubecontainer.PodStatus)
	PodResizeConditions(uid types.UID, terminal bool) []v1.PodCondition
	// ActuatedPod is the pod with the resources its containers were last given: its cgroup's.
	ActuatedPod(pod *v1.Pod) *v1.Pod
	ActuatedResources(uid types.UID, container string) (v1.ResourceRequirements, bool)
	RemovePod(uid types.UID)
}

// UserNamespaces holds the ranges of host IDs of hostUsers:false pods (*userns.Manager).
type UserNamespaces interface {
	// Release frees the pod's range once it has terminated, as the kubelet does.
	Release(uid types.UID)
}

// PodObjects serves the Secrets and ConfigMaps of registered pods (*podobjects.Manager); nil
// reads them without registration.
type PodObjects interface {
	RegisterPod(pod *v1.Pod)
	UnregisterPod(uid types.UID)
}

// Pods finds mirror pods (*podmanager.Manager).
type Pods interface {
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
}

// Syncer implements podworkers.PodSyncer.
type Syncer struct {
	Runtime Runtime
	Status  StatusManager
	Mirrors MirrorClient
	Pods    Pods
	Volumes Volumes
	// Objects, when set, has a pod registered before its volumes and env are made, and
	// unregistered once its volumes are gone.
	Objects PodObjects
	Prober  Prober
	Cgroups PodCgroups
	// Allocation, when set, has pods synced as allocated (in-place resize).
	Allocation Allocation
	// Userns, when set, frees the user namespace ranges of terminated pods.
	Userns  UserNamespaces
	Reasons *kubecontainer.ReasonCache
	// RuntimeName prefixes container IDs in statuses; read per sync since it is learnt after start.
	RuntimeName func() string
	NodeIPs     []string
	RootDir     string
	Log         *slog.Logger
	// Recorder gets the pod's DeadlineExceeded event; nil records none.
	Recorder Recorder
	// Now is the clock the active deadline is checked against; nil is time.Now.
	Now func() time.Time
	// RecursiveReadOnly tells whether the pod's runtime handler takes recursive read-only mounts,
	// for status.containerStatuses[].volumeMounts; nil reports none.
	RecursiveReadOnly func(ctx context.Context, pod *v1.Pod) bool

	evictedMu sync.Mutex
	evicted   map[types.UID]string // MarkEvicted's messages by pod
}

var _ podworkers.PodSyncer = (*Syncer)(nil)

func (s *Syncer) publish(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus, terminating bool) v1.PodStatus {
	old, _ := s.Status.GetPodStatus(pod.UID)
	name := ""
	if s.RuntimeName != nil {
		name = s.RuntimeName()
	}
	now := s.now()
	in := status.Inputs{Reasons: s.Reasons, RuntimeName: name, NodeIPs: s.NodeIPs, Now: now, Terminating: terminating}
	if s.Prober != nil {
		in.Probes = s.Prober
	}
	if s.RecursiveReadOnly != nil {
		in.RecursiveReadOnlyMounts = s.RecursiveReadOnly(ctx, pod)
	}
	if s.Allocation != nil {
		in.ResizeConditions = s.Allocation.PodResizeConditions(pod.UID, terminating)
		in.Actuated = func(c string) (v1.ResourceRequirements, bool) { return s.Allocation.ActuatedResources(pod.UID, c) }
	}
	st := status.Generate(pod, ps, old, in)
	// Checked on every status, while terminating too, so the kill's outcome does not replace it.
	s.enforceDeadline(pod, old, &st, now)
	s.enforceEviction(pod, old, &st)
	s.Status.SetPodStatus(pod, st)
	return st
}

// SyncPod observes, publishes, keeps the mirror, acts, and publishes again so the status knows of a
// start as soon as the runtime confirmed it rather than at the next PLEG event. With an allocation
// manager, a resize the spec asks for is decided first, and the pod is synced as allocated.
func (s *Syncer) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod, mirror *v1.Pod) (bool, error) {
	// A pod the apiserver (or this agent, before a restart) already recorded as finished never runs
	// again, even when the runtime no longer holds its containers to prove it.
	if terminal(pod.Status.Phase) {
		return true, nil
	}
	if old, ok := s.Status.GetPodStatus(pod.UID); ok && terminal(old.Phase) {
		return true, nil
	}
	ps, err := s.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return false, err
	}
	s.hostNetworkIPs(pod, ps)
	if s.Allocation != nil {
		pod = s.Allocation.HandlePodResourcesResize(pod)
		s.Allocation.CheckPodResizeInProgress(pod, ps)
	}
	st := s.publish(ctx, pod, ps, false)
	if terminal(st.Phase) {
		return true, nil
	}
	s.syncMirror(ctx, pod)
	if s.Objects != nil {
		s.Objects.RegisterPod(pod)
	}
	if s.Volumes != nil {
		if err := s.Volumes.Prepare(ctx, pod); err != nil {
			return false, fmt.Errorf("mount volumes: %w", err)
		}
	}
	if s.Cgroups != nil {
		// The pod cgroup holds what the containers were given: a resize changes it in step with
		// them (the runtime manager), not ahead of them.
		cg := pod
		if s.Allocation != nil {
			cg = s.Allocation.ActuatedPod(pod)
		}
		if err := s.Cgroups.EnsurePod(cg); err != nil {
			return false, fmt.Errorf("pod cgroup: %w", err)
		}
	}
	syncErr := s.Runtime.SyncPod(ctx, pod, ps)
	if ps, err = s.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
		s.hostNetworkIPs(pod, ps)
		if s.Prober != nil {
			s.Prober.SyncPod(pod, ps)
		}
		if s.Allocation != nil {
			s.Allocation.CheckPodResizeInProgress(pod, ps)
		}
		s.publish(ctx, pod, ps, false)
	}
	return false, syncErr
}

// hostNetworkIPs gives a host-network pod the node's IPs, which the runtime does not report for
// its sandbox: the containers' status.podIP(s) references, hooks and probes then see the IPs the
// pod's status publishes, as the kubelet copies its published pod IPs back before SyncPod.
func (s *Syncer) hostNetworkIPs(pod *v1.Pod, ps *kubecontainer.PodStatus) {
	if pod.Spec.HostNetwork {
		ps.IPs = slices.Clone(s.NodeIPs)
	}
}

func (s *Syncer) syncMirror(ctx context.Context, pod *v1.Pod) {
	if s.Mirrors == nil || !podmanager.IsStaticPod(pod) {
		return
	}
	mirror, ok := s.Pods.GetMirrorPodByPod(pod)
	if ok && !podmanager.MirrorMatches(pod, mirror) {
		uid := mirror.UID
		if err := s.Mirrors.DeleteMirrorPod(ctx, mirror.Name, mirror.Namespace, &uid); err != nil {
			s.Log.Warn("delete outdated mirror pod", "pod", kubecontainer.FormatPod(pod), "err", err)
			return
		}
		ok = false
	}
	if !ok {
		if err := s.Mirrors.CreateMirrorPod(ctx, pod); err != nil {
			s.Log.Warn("create mirror pod", "pod", kubecontainer.FormatPod(pod), "err", err)
		}
	}
}

// SyncTerminatingPod stops the pod's containers with the grace period.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, grace *int64) error {
	if s.Prober != nil {
		s.Prober.StopLivenessAndStartup(pod.UID)
	}
	if s.Allocation != nil {
		// Its status shows what it held, not a resize it was never granted.
		pod, _ = s.Allocation.UpdatePodFromAllocation(pod)
	}
	ps, err := s.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	s.hostNetworkIPs(pod, ps) // preStop httpGet hooks reach the pod at the node's IP
	if _, ok := s.evictionMessage(pod.UID); ok {
		// Failed/Evicted is known before the grace period runs out, as with the kubelet.
		s.publish(ctx, pod, ps, true)
	}
	if err := s.Runtime.KillPod(ctx, pod, ps, grace); err != nil {
		return err
	}
	if ps, err = s.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err != nil {
		return err
	}
	for _, c := range ps.ContainerStatuses {
		if c.State == kubecontainer.StateRunning {
			return fmt.Errorf("container %s still running after kill", c.Name)
		}
	}
	s.publish(ctx, pod, ps, true)
	if s.Cgroups != nil {
		// The pod's requests no longer count in its QoS tier's shares.
		if err := s.Cgroups.UpdateQoS(); err != nil {
			s.Log.Warn("QoS cgroups", "err", err)
		}
	}
	return nil
}

// SyncTerminatedPod removes a deleted pod's containers, sandboxes and volumes, confirms the deletion
// to the apiserver, and deletes its mirror; a pod that merely finished (or was evicted) keeps its
// containers and loses its volumes.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, deleted bool) error {
	if s.Prober != nil {
		s.Prober.RemovePod(pod.UID)
	}
	s.Status.TerminatePod(pod, s.now())
	if !deleted {
		if s.Volumes != nil {
			if err := s.Volumes.TearDownVolumes(pod.UID); err != nil {
				return err
			}
		}
		s.unregister(pod.UID)
		s.releaseUserns(pod.UID)
		return nil
	}
	ps, err := s.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	if err := s.Runtime.RemovePod(ctx, ps); err != nil {
		return err
	}
	if err := s.removePodDir(pod.UID); err != nil {
		return err
	}
	s.unregister(pod.UID)
	s.releaseUserns(pod.UID)
	if s.Volumes != nil {
		s.Volumes.Forget(pod.UID)
	}
	if s.Allocation != nil {
		// Its resources are free: a deferred resize of another pod may fit now.
		s.Allocation.RemovePod(pod.UID)
	}
	if err := s.Status.PodTerminated(ctx, pod); err != nil {
		return err
	}
	if s.Mirrors != nil && podmanager.IsStaticPod(pod) {
		if mirror, ok := s.Pods.GetMirrorPodByPod(pod); ok {
			uid := mirror.UID
			if err := s.Mirrors.DeleteMirrorPod(ctx, mirror.Name, mirror.Namespace, &uid); err != nil {
				return err
			}
		}
	}
	s.Status.Forget(pod.UID)
	s.forgetEviction(pod.UID)
	return nil
}

// SyncTerminatingRuntimePod stops and removes an orphan found in the runtime.
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubecontainer.RuntimePod) error {
	ps, err := s.Runtime.GetPodStatus(ctx, rp.ID, rp.Name, rp.Namespace)
	if err != nil {
		return err
	}
	if err := s.Runtime.KillPod(ctx, nil, ps, nil); err != nil {
		return err
	}
	if err := s.Runtime.RemovePod(ctx, ps); err != nil {
		return err
	}
	if err := s.removePodDir(rp.ID); err != nil {
		s.Log.Warn("remove orphan's pod dir", "uid", rp.ID, "err", err)
	}
	return nil
}

// removePodDir removes pods/<uid> after the pod's containers are gone. With a volume manager it
// unmounts first and refuses to delete through a mount left behind (a subPath bind of a hostPath
// would otherwise lose the host's files); housekeeping retries what stays.
func (s *Syncer) removePodDir(uid types.UID) error {
	if s.Volumes != nil {
		if err := s.Volumes.TearDown(uid); err != nil {
			return fmt.Errorf("tear down volumes: %w", err)
		}
		return nil
	}
	if s.RootDir == "" {
		return nil
	}
	// Refused rather than cleaned: RemoveAll of a joined "../../x" would delete a host folder.
	dir, err := podpath.PodDir(s.RootDir, uid)
	if err != nil {
		return fmt.Errorf("remove pod dir: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove pod dir: %w", err)
	}
	return nil
}

func (s *Syncer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func terminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// releaseUserns frees the range of a pod whose containers are all gone: no process runs with its
// IDs any more.
func (s *Syncer) releaseUserns(uid types.UID) {
	if s.Userns != nil {
		s.Userns.Release(uid)
	}
}

// unregister drops the pod's Secrets and ConfigMaps once its volumes are gone: nothing reads
// them for it any more.
func (s *Syncer) unregister(uid types.UID) {
	if s.Objects != nil {
		s.Objects.UnregisterPod(uid)
	}
}
