// Package stats builds the kubelet's /stats/summary: node figures from /proc and the filesystems
// under the agent's directories, pod and container figures from the runtime over CRI
// (ListPodSandboxStats, or ListContainerStats for runtimes without it).
package stats

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// Runtime is the part of CRI the stats come from; a runtimeapi.RuntimeServiceClient is one.
type Runtime interface {
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListPodSandboxStats(ctx context.Context, in *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ListContainerStats(ctx context.Context, in *runtimeapi.ListContainerStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error)
}

// Options say where the node's figures come from. Zero values take the defaults.
type Options struct {
	NodeName string
	ProcRoot string // "/proc"
	RootDir  string // the agent's root dir: the node filesystem, and pods/<uid>/volumes ("/var/lib/nodelet/agent")
	ImageDir string // the image store, for the image filesystem (RootDir when empty)
	LogDir   string // container logs, counted per pod ("/var/log/pods")
	// CgroupMount is where cgroups are mounted: this host's (cgroupfs.Host()) when empty, else
	// a folder whose version is detected once.
	CgroupMount string
	// PodsCgroup is the parent cgroup of all pods, reported as the "pods" system container
	// ("" leaves it out).
	PodsCgroup string
	// RuntimeCgroup, when set, is reported as the "runtime" system container.
	RuntimeCgroup string
	// Claims measures pods' claimed volumes (the volume manager); nil reports none.
	Claims ClaimStats
}

// ClaimStats are a pod's claimed volumes, measured and named with their claims.
type ClaimStats interface {
	PodClaimStats(ctx context.Context, uid types.UID) []statsapi.VolumeStats
}

// Provider answers Summary calls; it remembers the previous CPU sample to report usage rates.
type Provider struct {
	rt   Runtime
	opts Options
	fs   cgroupfs.FS
	now  func() time.Time

	mu       sync.Mutex
	lastCPU  cpuSample
	lastPods map[string]cpuSample // by pod UID and "UID/container"
}

// New returns a Provider reading rt and the host.
func New(rt Runtime, opts Options) *Provider {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.RootDir == "" {
		opts.RootDir = "/var/lib/nodelet/agent"
	}
	if opts.ImageDir == "" {
		opts.ImageDir = opts.RootDir
	}
	if opts.LogDir == "" {
		opts.LogDir = "/var/log/pods"
	}
	fs := cgroupfs.Host()
	if opts.CgroupMount != "" {
		fs = cgroupfs.FS{Mount: opts.CgroupMount, Version: cgroupfs.Detect(opts.CgroupMount)}
	}
	return &Provider{rt: rt, opts: opts, fs: fs, now: time.Now}
}

// Summary is /stats/summary. A runtime failure is an error; a host figure that cannot be read is
// left out (nil), as the kubelet does.
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	now := metav1.NewTime(p.now())
	node, err := p.node(now)
	if err != nil {
		return nil, err
	}
	pods, err := p.pods(ctx, now)
	if err != nil {
		return nil, err
	}
	p.fillRates(pods)
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

func (p *Provider) node(now metav1.Time) (*statsapi.NodeStats, error) {
	n := &statsapi.NodeStats{NodeName: p.opts.NodeName}
	if usage, boot, err := nodeCPU(p.opts.ProcRoot); err == nil {
		n.StartTime = metav1.NewTime(boot)
		n.CPU = &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &usage}
		p.mu.Lock()
		if prev := p.lastCPU; !prev.at.IsZero() && now.Time.After(prev.at) && usage >= prev.usage {
			rate := uint64(float64(usage-prev.usage) / now.Time.Sub(prev.at).Seconds())
			n.CPU.UsageNanoCores = &rate
		}
		p.lastCPU = cpuSample{at: now.Time, usage: usage}
		p.mu.Unlock()
	}
	n.Memory, n.Swap = nodeMemory(p.fs, p.opts.ProcRoot, now)
	n.Network = nodeNetwork(p.opts.ProcRoot, now)
	n.Fs = fsStats(p.opts.RootDir, now)
	if img := fsStats(p.opts.ImageDir, now); img != nil {
		n.Runtime = &statsapi.RuntimeStats{ImageFs: img, ContainerFs: img}
	}
	n.Rlimit = nodeRlimit(p.opts.ProcRoot, now)
	self, haveSelf := ownCgroup(p.fs, p.opts.ProcRoot)
	for _, sc := range []struct {
		name string
		path cgroupPath
		ok   bool
	}{
		{statsapi.SystemContainerKubelet, self, haveSelf},
		{statsapi.SystemContainerRuntime, samePath(p.opts.RuntimeCgroup), p.opts.RuntimeCgroup != ""},
		{statsapi.SystemContainerPods, samePath(p.opts.PodsCgroup), p.opts.PodsCgroup != ""},
	} {
		if !sc.ok {
			continue
		}
		if cpu, mem, ok := cgroupStats(p.fs, sc.path, now); ok {
			n.SystemContainers = append(n.SystemContainers, statsapi.ContainerStats{Name: sc.name, StartTime: n.StartTime, CPU: cpu, Memory: mem})
		}
	}
	return n, nil
}

// PodStats are the running pods' figures of Summary, without the node's: what the eviction
// manager checks ephemeral-storage limits against.
func (p *Provider) PodStats(ctx context.Context) ([]statsapi.PodStats, error) {
	return p.pods(ctx, metav1.NewTime(p.now()))
}

func (p *Provider) pods(ctx context.Context, now metav1.Time) ([]statsapi.PodStats, error) {
	resp, err := p.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil && ctx.Err() == nil && status.Code(err) != codes.Unavailable {
		// Unimplemented by some runtimes; containerd 1.6 fails the whole list with Unknown while
		// any sandbox is not ready (an evicted pod's, say). The containers' figures still come.
		return p.podsFromContainers(ctx, now)
	}
	if err != nil {
		return nil, fmt.Errorf("list pod sandbox stats: %w", err)
	}
	sandboxes, err := p.readySandboxes(ctx)
	if err != nil {
		return nil, err
	}
	// CRI stats carry no start time: the containers' creation, listed once, is it.
	ctrs, err := p.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	created := map[string]int64{}
	for _, c := range ctrs.GetContainers() {
		created[c.GetId()] = c.GetCreatedAt()
	}
	var out []statsapi.PodStats
	for _, s := range resp.GetStats() {
		sb, ok := sandboxes[s.GetAttributes().GetId()]
		if !ok {
			continue // not ready: the kubelet reports only running pods
		}
		ps := podStats(sb, now)
		if l := s.GetLinux(); l != nil {
			ps.CPU = cpuStats(l.GetCpu(), now)
			ps.Memory = memStats(l.GetMemory(), now)
			ps.Network = netStats(l.GetNetwork(), now)
			if pr := l.GetProcess(); pr != nil && pr.GetProcessCount() != nil {
				n := pr.GetProcessCount().GetValue()
				ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
			}
			for _, c := range l.GetContainers() {
				ps.Containers = append(ps.Containers, containerStats(c, created[c.GetAttributes().GetId()], now))
			}
		}
		p.addStorage(&ps, now)
		p.addVolumes(ctx, &ps, now)
		out = append(out, ps)
	}
	return out, nil
}

// podsFromContainers serves runtimes without ListPodSandboxStats (containerd 1.6): the pod's CPU
// and memory are the sums of its containers'.
func (p *Provider) podsFromContainers(ctx context.Context, now metav1.Time) ([]statsapi.PodStats, error) {
	sandboxes, err := p.readySandboxes(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := p.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	ctrs, err := p.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	sandboxOf, created := map[string]string{}, map[string]int64{}
	for _, c := range ctrs.GetContainers() {
		sandboxOf[c.GetId()] = c.GetPodSandboxId()
		created[c.GetId()] = c.GetCreatedAt()
	}
	byPod := map[string]*statsapi.PodStats{}
	var order []string
	for id, sb := range sandboxes {
		ps := podStats(sb, now)
		byPod[id] = &ps
		order = append(order, id)
	}
	for _, c := range cs.GetStats() {
		ps := byPod[sandboxOf[c.GetAttributes().GetId()]]
		if ps == nil {
			continue
		}
		cst := containerStats(c, created[c.GetAttributes().GetId()], now)
		ps.Containers = append(ps.Containers, cst)
		ps.CPU = addCPU(ps.CPU, cst.CPU)
		ps.Memory = addMem(ps.Memory, cst.Memory)
	}
	out := make([]statsapi.PodStats, 0, len(order))
	for _, id := range order {
		if n, ok := podProcesses(p.fs, p.opts.PodsCgroup, byPod[id].PodRef.UID); ok {
			byPod[id].ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
		}
		p.addStorage(byPod[id], now)
		p.addVolumes(ctx, byPod[id], now)
		out = append(out, *byPod[id])
	}
	return out, nil
}

func (p *Provider) readySandboxes(ctx context.Context) (map[string]*runtimeapi.PodSandbox, error) {
	resp, err := p.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	out := map[string]*runtimeapi.PodSandbox{}
	for _, s := range resp.GetItems() {
		out[s.GetId()] = s
	}
	return out, nil
}

func podStats(sb *runtimeapi.PodSandbox, now metav1.Time) statsapi.PodStats {
	md := sb.GetMetadata()
	return statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
		StartTime: metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
	}
}
