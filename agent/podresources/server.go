// Package podresources serves the kubelet's PodResources API (v1) on its socket, so that node
// agents written for the kubelet (device plugins' monitors, topology exporters, NUMA-aware
// schedulers' node agents) learn which devices and exclusive CPUs each container holds and what
// the node could hand out.
//
// It answers as the kubelet v1.34 does with its default feature gates: List lists the active
// pods (KubeletPodResourcesListUseActivePods), Get is served (KubeletPodResourcesGet), and of a
// pod's init containers only the restartable ones (sidecars) are listed, since the others have
// finished by the time the pod runs. Memory and dynamic resources are never filled in: nodelet
// has no memory manager and no DRA, which is what a kubelet with the None memory policy and no
// resource claims answers too.
package podresources

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Pods lists the pods the node runs (podstate.View).
//
// When it can also look one pod up by name, as podstate.View's Pod(namespace, name) does over
// every desired pod, Get uses that: the kubelet's Get finds any pod its pod manager holds, also
// one that is terminating or finished, while List shows only the active ones.
type Pods interface{ ActivePods() []*v1.Pod }

// podFinder is the optional lookup of Pods described there.
type podFinder interface {
	Pod(namespace, name string) (*v1.Pod, bool)
}

// Devices are the device manager's allocations (*devicemanager.Manager); nil: no devices.
type Devices interface {
	// ContainerDevices are the devices allocated to one container, one entry per resource.
	ContainerDevices(podUID, container string) []*podresourcesv1.ContainerDevices
	// AllocatableDevices are the healthy devices of every registered resource.
	AllocatableDevices() []*podresourcesv1.ContainerDevices
}

// CPUs are the CPU manager's assignments (*cpumanager.Manager); nil: none.
type CPUs interface {
	ContainerCPUs(podUID, container string) []int64
	AllocatableCPUs() []int64
}

// Deps are what the answers are read from. Devices and CPUs must be untyped nils when absent: a
// nil *Manager in the interface would be called.
type Deps struct {
	Pods    Pods
	Devices Devices
	CPUs    CPUs
	Log     *slog.Logger
}

// The kubelet's limits (DefaultQPS, DefaultBurstTokens): consumers poll, and none has a
// legitimate need for more than a hundred answers a second; a runaway one must not take the
// agent's CPU.
const (
	qps   = 100
	burst = 10
)

// Server is the PodResourcesLister: one per agent, its answers built afresh on every call from
// the managers that own the state, so it keeps nothing of its own to get stale.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	d       Deps
	limiter *rate.Limiter
	now     func() time.Time // the limiter's clock; tests hold it still
}

// New makes the server; Serve puts it on its socket.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Server{d: d, limiter: rate.NewLimiter(qps, burst), now: time.Now}
}

// List is what node agents poll to map devices and CPUs to pods: every active pod with its
// containers' resources.
func (s *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	pods := s.d.Pods.ActivePods()
	out := make([]*podresourcesv1.PodResources, 0, len(pods))
	for _, p := range pods {
		out = append(out, s.podResources(p))
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: out}, nil
}

// Get is List for one pod, for agents reacting to one pod's start. A missing pod is an error
// with the kubelet's words and code (Unknown), which its clients already handle.
func (s *Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	p, ok := s.pod(req.GetPodNamespace(), req.GetPodName())
	if !ok {
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
	}
	return &podresourcesv1.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
}

// GetAllocatableResources is the node's capacity in devices and exclusive CPUs (not what is free
// now), which agents compare with List to see what is left.
func (s *Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	resp := &podresourcesv1.AllocatableResourcesResponse{}
	if s.d.Devices != nil {
		resp.Devices = s.d.Devices.AllocatableDevices()
	}
	if s.d.CPUs != nil {
		resp.CpuIds = s.d.CPUs.AllocatableCPUs()
	}
	return resp, nil
}

func (s *Server) pod(namespace, name string) (*v1.Pod, bool) {
	if f, ok := s.d.Pods.(podFinder); ok {
		return f.Pod(namespace, name)
	}
	for _, p := range s.d.Pods.ActivePods() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// podResources lists the sidecars, then the app containers, in the spec's order.
func (s *Server) podResources(p *v1.Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace,
		Containers: make([]*podresourcesv1.ContainerResources, 0, len(p.Spec.InitContainers)+len(p.Spec.Containers))}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out.Containers = append(out.Containers, s.containerResources(p, c.Name))
		}
	}
	for i := range p.Spec.Containers {
		out.Containers = append(out.Containers, s.containerResources(p, p.Spec.Containers[i].Name))
	}
	return out
}

// containerResources leaves Memory and DynamicResources empty: see the package comment.
func (s *Server) containerResources(p *v1.Pod, name string) *podresourcesv1.ContainerResources {
	c := &podresourcesv1.ContainerResources{Name: name}
	if s.d.Devices != nil {
		c.Devices = s.d.Devices.ContainerDevices(string(p.UID), name)
	}
	if s.d.CPUs != nil {
		c.CpuIds = s.d.CPUs.ContainerCPUs(string(p.UID), name)
	}
	return c
}
