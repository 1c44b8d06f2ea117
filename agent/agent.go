// Package agent wires the agent's parts together: pod sources → SyncLoop → pod workers → runtime
// manager → CRI, with PLEG, the status manager and (in a cluster) node status and mirror pods beside
// them. It holds no logic of its own beyond that wiring; each part lives in its own package.
//
// The agent talks to a runtime only through CRI gRPC; no package under agent/ imports runtime/
// (boundary_test.go enforces it).
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/allocation"
	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/cm/cpumanager"
	"github.com/nodelet/nodelet/agent/cm/qos"
	"github.com/nodelet/nodelet/agent/config"
	kubecontainer "github.com/nodelet/nodelet/agent/container"
	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/credentials"
	"github.com/nodelet/nodelet/agent/eviction"
	"github.com/nodelet/nodelet/agent/gc"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
	"github.com/nodelet/nodelet/agent/kubeclient"
	"github.com/nodelet/nodelet/agent/kubeconfig"
	"github.com/nodelet/nodelet/agent/kuberuntime"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/oomwatcher"
	"github.com/nodelet/nodelet/agent/pleg"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podstate"
	"github.com/nodelet/nodelet/agent/podsync"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/prober"
	"github.com/nodelet/nodelet/agent/recorder"
	"github.com/nodelet/nodelet/agent/services"
	"github.com/nodelet/nodelet/agent/stats"
	"github.com/nodelet/nodelet/agent/status"
	"github.com/nodelet/nodelet/agent/syncloop"
	"github.com/nodelet/nodelet/agent/userns"
	"github.com/nodelet/nodelet/agent/volumemanager"
)

// KubeClient is every part of the apiserver the agent's parts use; a *kubeclient.Client is one.
type KubeClient interface {
	Pods(namespace string) kubeclient.PodInterface
	Nodes() kubeclient.NodeInterface
	Leases(namespace string) kubeclient.LeaseInterface
	Services(namespace string) kubeclient.ServiceInterface
	Secrets(namespace string) kubeclient.SecretInterface
	ConfigMaps(namespace string) kubeclient.ConfigMapInterface
	ServiceAccounts(namespace string) kubeclient.ServiceAccountInterface
	Events(namespace string) kubeclient.EventInterface
	RuntimeClasses() kubeclient.RuntimeClassInterface
	TokenReviews() kubeclient.TokenReviewInterface
	SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface
	CertificateSigningRequests() kubeclient.CertificateSigningRequestInterface
}

// Deps are what a test or an embedding program may hand the agent instead of letting it make them.
type Deps struct {
	// KubeClient overrides Config.Kubeconfig (tests pass an adapted fake clientset).
	KubeClient KubeClient
	Log        *slog.Logger
	// HousekeepingPeriod and RelistPeriod override the defaults (2s, 1s); tests shorten them.
	HousekeepingPeriod time.Duration
	RelistPeriod       time.Duration
	// ContainerGCPeriod and ImageGCPeriod override the kubelet's 1 and 5 minutes; tests shorten them.
	ContainerGCPeriod time.Duration
	ImageGCPeriod     time.Duration
	// Cgroups overrides this host's cgroup hierarchies for node allocatable, QoS and pod cgroups
	// (tests pass a tree of plain folders).
	Cgroups *cm.Cgroups
	// CPUTopology overrides this machine's CPUs for the CPU manager.
	CPUTopology *cpumanager.Topology
}

// Agent is the assembled agent: New builds every part, Run starts them.
type Agent struct {
	cfg     agentconfig.Config
	deps    Deps
	log     *slog.Logger
	conn    *grpc.ClientConn
	runtime runtimeapi.RuntimeServiceClient
	// stats are the summary API's figures, which the eviction manager reads too.
	stats  *stats.Provider
	client KubeClient
	// sender posts events to the apiserver; nil standalone.
	sender *recorder.Recorder

	reasons  *kubecontainer.ReasonCache
	manager  *kuberuntime.Manager
	pods     *podmanager.Manager
	statuses *status.Manager
	config   *config.PodConfig
	// runtimeClasses are the manifest folder's RuntimeClasses, standalone only (nil in a cluster).
	runtimeClasses *config.RuntimeClassSet
	pleg           *pleg.GenericPLEG
	nodes          *nodestatus.Manager
	oom            *oomwatcher.Watcher
	mirrors        *podmanager.MirrorClient
	syncer         *podsync.Syncer
	events         *recorder.History
	vols           *volumemanager.Manager
	imageGC        *images.ImageGC
	gc             *gc.Runner
	eviction       *eviction.Manager
	probes         *prober.Manager
	services       *services.Lister
	// admission is the node's admit handlers, in the kubelet's order.
	admission  *admission.Chain
	nodeLister *admission.NodeLister
	workers    *podworkers.PodWorkers
	loop       *syncloop.SyncLoop
	state      *podstate.View
	api        *api
	rotator    *logs.Rotator
	cm         *cm.Manager
	qos        *qos.Manager // nil when the runtime places pods (no cgroup root)
	cpus       *cpumanager.Manager
	alloc      *allocation.Manager
	userns     *userns.Manager

	runtimeName atomic.Value // string
}

// New builds the agent and every part of it; nothing runs until Run.
func New(cfg agentconfig.Config, deps Deps) (*Agent, error) {
	if err := agentconfig.Complete(&cfg); err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	sysctls, err := sysctl.New(cfg.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	a := &Agent{cfg: cfg, log: log, deps: deps, reasons: kubecontainer.NewReasonCache()}
	a.runtimeName.Store("")
	housekeeping := cmp.Or(deps.HousekeepingPeriod, syncloop.DefaultHousekeepingPeriod)

	if a.conn, err = dialRuntime(cfg.ContainerRuntimeEndpoint, cfg.RuntimeRequestTimeout); err != nil {
		return nil, err
	}
	a.runtime = runtimeapi.NewRuntimeServiceClient(a.conn)
	imageService := runtimeapi.NewImageServiceClient(a.conn)

	a.client = deps.KubeClient
	if a.client == nil && cfg.Kubeconfig != "" {
		rc, err := kubeconfig.Load(cfg.Kubeconfig)
		if err != nil {
			return nil, a.closeWith(fmt.Errorf("kubeconfig: %w", err))
		}
		rc.QPS, rc.Burst = cfg.KubeAPIQPS, cfg.KubeAPIBurst
		if cfg.ContentType != "" {
			rc.ContentType = cfg.ContentType
		}
		c, err := kubeclient.New(rc)
		if err != nil {
			return nil, a.closeWith(fmt.Errorf("kubeconfig: %w", err))
		}
		a.client = c
	}

	a.pods = podmanager.New()
	a.statuses = status.NewManager(a.client, a.pods, log)
	a.config = config.NewPodConfig(log)
	phases := podworkers.NewPhases()
	a.state = podstate.New(a.pods, phases, a.statuses, a.config, a.configuredSources())

	dns, err := kuberuntime.NewDNSConfigurer(cfg.ClusterDNS, cfg.ClusterDomain, cfg.ResolvConf)
	if err != nil {
		log.Warn("pods with dnsPolicy Default get no resolver settings", "err", err)
	}
	a.events = recorder.NewHistory(a.recorder())
	if a.cm, err = cm.New(cm.Config{MaxPods: cfg.MaxPods, PodsPerCore: cfg.PodsPerCore, RootDir: cfg.RootDir,
		SystemReserved: cfg.SystemReservedList, KubeReserved: cfg.KubeReservedList, HardEvictionThresholds: cfg.EvictionThresholds,
		EnforceNodeAllocatable: cfg.EnforceNodeAllocatable, PodsCgroup: cfg.CgroupRoot,
		SystemReservedCgroup: cfg.SystemReservedCgroup, KubeReservedCgroup: cfg.KubeReservedCgroup},
		cm.Deps{Cgroups: deps.Cgroups, Recorder: a.events, Node: nodestatus.Ref(cfg.NodeName), Log: log}); err != nil {
		return nil, a.closeWith(err)
	}
	allocatable := a.cm.Allocatable
	if a.cpus, err = cpumanager.NewForNode(cpumanager.NodeConfig{Policy: cfg.CPUManagerPolicy, Options: cfg.CPUManagerPolicyOptions,
		ReconcilePeriod: cfg.CPUManagerReconcilePeriod, ReservedSystemCPUs: cfg.ReservedSystemCPUs,
		SystemReserved: cfg.SystemReservedList, KubeReserved: cfg.KubeReservedList, TopologyManagerPolicy: cfg.TopologyManagerPolicy,
		StateDir: cfg.RootDir},
		cpumanager.Deps{Topology: deps.CPUTopology, Runtime: a.runtime, Holds: a.state.HoldsCPUs, SourcesReady: a.state.SourcesReady, Log: log}); err != nil {
		return nil, a.closeWith(err)
	}
	vols := &volumemanager.Manager{Client: a.client, RootDir: cfg.RootDir, Recorder: a.events, Allocatable: allocatable}
	if a.client == nil && cfg.PodManifestPath != "" {
		// Standalone: secrets and config maps sit beside the static pod manifests.
		vols.Objects = &volumemanager.DirObjects{Dir: cfg.PodManifestPath}
	}
	a.vols = vols
	a.imageGC = &images.ImageGC{Images: imageService, Containers: a.runtime, Log: log, Keep: []string{cfg.PodInfraContainerImage},
		Policy: images.GCPolicy{HighThresholdPercent: cfg.ImageGCHighThresholdPercent, LowThresholdPercent: cfg.ImageGCLowThresholdPercent,
			MinAge: cfg.ImageMinimumGCAge}}
	containerGC := &containergc.GC{Runtime: a.runtime, Pods: containergc.DeletedFunc(a.state.Gone), PodLogsDir: cfg.PodLogsDir, Log: log,
		Policy: containergc.Policy{MinAge: cfg.MinimumContainerTTL, MaxPerPodContainer: cfg.MaxPerPodContainer, MaxContainers: cfg.MaxContainers}}
	a.stats = stats.New(a.runtime, stats.Options{NodeName: cfg.NodeName, RootDir: cfg.RootDir,
		LogDir: cfg.PodLogsDir, PodsCgroup: cfg.CgroupRoot})
	machine := &eviction.Machine{RootDir: cfg.RootDir, ImageFs: imageFsMountpoint(imageService), PodsCgroup: cfg.CgroupRoot}
	if cfg.KernelMemcgNotification {
		if err := machine.CheckMemcgNotification(); err != nil {
			return nil, a.closeWith(fmt.Errorf("kernelMemcgNotification: %w", err))
		}
	}
	// Built before node status, which reads its conditions. Its kills reach the workers through
	// the SyncLoop.
	kills := syncloop.NewKills()
	a.eviction = eviction.New(eviction.Config{Thresholds: cfg.EvictionThresholds, NodeName: cfg.NodeName,
		PressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod, MaxPodGracePeriodSeconds: int64(cfg.EvictionMaxPodGracePeriod),
		MonitoringInterval: cfg.EvictionMonitoringInterval, KernelMemcgNotification: cfg.KernelMemcgNotification},
		eviction.Deps{Measurer: machine, Notifier: machine,
			Stats: eviction.SummaryStats{Pods: a.stats.PodStats}, ActivePods: a.allocatedPods, Kill: kills.Evict,
			DeleteDeadContainers: containerGC.DeleteDeadContainers, DeleteUnusedImages: a.imageGC.DeleteUnusedImages,
			Recorder: a.events, Evicted: metrics.Evicted, Log: log, PodCleanedUp: a.state.PodCleanedUp,
			StorageStats: a.stats.PodStats})
	a.probes = prober.New(a.runtime, a.events, log)
	if a.userns, err = userns.New(userns.Config{RootDir: cfg.RootDir, MaxPods: cfg.MaxPods,
		Handlers: userns.RuntimeHandlers{Runtime: a.runtime}, Log: log}); err != nil {
		return nil, a.closeWith(fmt.Errorf("create user namespace manager: %w", err))
	}
	serialize := cfg.SerializeImagePulls
	a.manager = kuberuntime.NewManager(kuberuntime.Deps{
		Runtime: a.runtime, Images: imageService, Recorder: a.events, Reasons: a.reasons, Log: log,
		RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir, NodeName: cfg.NodeName,
		NodeIPs: cfg.NodeIPs, DNS: dns, CgroupRoot: cfg.CgroupRoot, Cgroups: deps.Cgroups, Volumes: vols, EnvData: vols, SubPaths: vols,
		Credentials: &credentials.Keyring{Secrets: vols}, Probes: a.probes, Allocatable: allocatable,
		ImagePulls: images.Options{SerializeImagePulls: &serialize, MaxParallelImagePulls: cfg.MaxParallelImagePulls,
			Used: a.imageGC.MarkUsed},
		Userns: a.userns,
	})
	if a.cpus.Policy() == cpumanager.PolicyStatic {
		a.manager.CPUs = a.cpus
	}
	a.manager.SeccompDefault = cfg.SeccompDefault
	if a.client == nil && cfg.PodManifestPath != "" {
		// Standalone: RuntimeClasses sit beside the static pod manifests too.
		a.runtimeClasses = config.NewRuntimeClassSet()
		a.manager.RuntimeClasses = a.runtimeClasses
	}
	if a.client != nil {
		a.manager.RuntimeClasses = kuberuntime.APIRuntimeClasses{Client: a.client}
		// Containers get the cluster's Service variables; only a cluster has Services.
		a.services = services.New(a.client)
		a.manager.Services = a.services
	}
	var ownNode admission.NodeFunc // standalone: the Node this machine would register
	if a.client != nil {
		a.nodeLister = admission.NewNodeLister(a.client, cfg.NodeName)
		ownNode = a.nodeLister.Get
	}
	a.admission = admission.NewChain(admission.Parts{Eviction: a.eviction, Sysctls: sysctls, MaxPods: cfg.MaxPods,
		Predicates: admission.New(admission.AnyWay(ownNode, admission.LocalNode(cfg.NodeName, cfg.NodeLabels, cfg.RegisterWithTaints)), allocatable),
		AppArmor:   admission.NewAppArmor(nil), CPUs: a.cpus}, a.state)
	a.gc = gc.New(gc.Periods{PodDirs: housekeeping, Containers: deps.ContainerGCPeriod, Images: deps.ImageGCPeriod},
		gc.Deps{Containers: containerGC, Images: a.imageGC, Runtime: a.manager, PodDirs: vols, Userns: a.userns, Gone: a.state.Gone,
			Node: nodestatus.Ref(cfg.NodeName), Recorder: a.events, Log: log})
	a.pleg = pleg.New(a.runtime, pleg.Options{Log: log, RelistPeriod: deps.RelistPeriod})
	// The Node is kept standalone too, for the API; only a registering agent posts it.
	nodeDeps := nodestatus.Deps{Runtime: a.runtime, Images: imageService, Recorder: a.events,
		NodeName: cfg.NodeName, Labels: cfg.NodeLabels, Taints: cfg.RegisterWithTaints, RootDir: cfg.RootDir, PodCIDR: cfg.PodCIDR,
		NodeIPs: cfg.NodeIPs, MaxPods: cfg.MaxPods, StatusUpdateFrequency: cfg.NodeStatusUpdateFrequency,
		StatusReportFrequency: cfg.NodeStatusReportFrequency,
		LeaseDurationSeconds:  cfg.NodeLeaseDurationSeconds, Log: log, Pressure: a.eviction.NodeConditions, Resources: a.cm.Resources}
	if a.client != nil && cfg.RegisterNode {
		nodeDeps.Client = a.client
	}
	a.nodes = nodestatus.New(nodeDeps)
	a.oom = &oomwatcher.Watcher{Node: nodestatus.Ref(cfg.NodeName), CgroupRoot: cfg.CgroupRoot, Recorder: a.events, Log: log}
	if a.client != nil {
		a.mirrors = &podmanager.MirrorClient{Client: a.client, NodeName: cfg.NodeName, NodeUID: a.nodeUID}
	}
	a.syncer = &podsync.Syncer{Runtime: a.manager, Status: a.statuses, Pods: a.pods, Volumes: vols, Reasons: a.reasons,
		Prober: a.probes, Recorder: a.events, RuntimeName: func() string { return a.runtimeName.Load().(string) }, NodeIPs: cfg.NodeIPs,
		RootDir: cfg.RootDir, Userns: a.userns, Log: log, RecursiveReadOnly: a.manager.SupportsRecursiveReadOnlyMounts}
	if cfg.CgroupRoot != "" {
		a.qos = qos.New(qos.Config{Root: cfg.CgroupRoot, PodPidsLimit: cfg.PodPidsLimit},
			qos.Deps{Cgroups: deps.Cgroups, ActivePods: a.state.ActivePods, RuntimePods: a.runtimePodUIDs, Log: log})
		a.syncer.Cgroups = a.qos
	}
	if a.mirrors != nil {
		a.syncer.Mirrors = a.mirrors
	}
	if err := a.wireAllocation(); err != nil {
		return nil, a.closeWith(err)
	}
	a.workers = podworkers.New(a.syncer, phases, log)
	loopDeps := syncloop.Deps{
		Updates: a.config.Updates(), PLEG: a.pleg.Watch(), Probes: a.probes.Updates(), Pods: a.pods, Workers: a.workers,
		Runtime: a.manager, Statuses: a.statuses, Admit: a.alloc.AddPod, Reject: a.reject,
		SourcesReady:       a.state.SourcesReady,
		Kills:              kills,
		Evicted:            a.syncer,
		BackOffs:           a.manager,
		Events:             a.events,
		Listed:             a.config,
		Resizes:            a.alloc,
		SyncFrequency:      cfg.SyncFrequency,
		HousekeepingPeriod: housekeeping,
		Log:                log,
	}
	if a.mirrors != nil {
		loopDeps.Mirrors = a.mirrors
	}
	a.loop = syncloop.New(loopDeps)
	if a.rotator, err = logs.NewRotator(a.runtime, cfg.ContainerLogMaxSize, cfg.ContainerLogMaxFiles); err != nil {
		return nil, a.closeWith(err)
	}
	if a.api, err = newAPI(a); err != nil {
		return nil, a.closeWith(err)
	}
	return a, nil
}

// closeWith releases what New opened before failing with err.
func (a *Agent) closeWith(err error) error {
	a.conn.Close()
	return err
}

func (a *Agent) nodeUID() types.UID {
	if a.nodes == nil {
		return ""
	}
	return a.nodes.NodeUID()
}

func (a *Agent) recorder() recorder.Interface {
	if a.client == nil {
		return recorder.NewSlog(a.log)
	}
	client := a.client
	a.sender = recorder.New(func(ns string) recorder.Sink { return client.Events(ns) }, kubeclient.Scheme(),
		v1.EventSource{Component: "kubelet", Host: a.cfg.NodeName}, a.log)
	return a.sender
}

// configuredSources lists the pod sources configured; housekeeping waits until each has spoken.
func (a *Agent) configuredSources() []string {
	var s []string
	if a.cfg.PodManifestPath != "" {
		s = append(s, config.FileSource)
	}
	if a.cfg.ManifestURL != "" {
		s = append(s, config.HTTPSource)
	}
	if a.client != nil {
		s = append(s, config.ApiserverSource)
	}
	return s
}

// Run starts every part and runs until ctx ends or the agent's API fails; it returns once all
// parts have stopped. An Agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer a.conn.Close()
	var wg sync.WaitGroup
	var apiErr error
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("agent part stopped", "part", name, "err", err)
			}
		}()
	}
	goRun("node allocatable", func(ctx context.Context) error { a.cm.Run(ctx); return nil })
	goRun("CPU manager", func(ctx context.Context) error { a.cpus.Run(ctx); return nil })
	if a.qos != nil {
		goRun("QoS cgroups", func(ctx context.Context) error { a.qos.Run(ctx); return nil })
	}
	goRun("runtime version", a.learnRuntime)
	goRun("pod workers", func(ctx context.Context) error { a.workers.Run(ctx); return nil })
	goRun("prober", func(ctx context.Context) error { a.probes.Run(ctx); return nil })
	if a.sender != nil {
		goRun("events", func(ctx context.Context) error { a.sender.Run(ctx); return nil })
	}
	if a.services != nil {
		goRun("services", func(ctx context.Context) error { a.services.Run(ctx); return nil })
	}
	if a.nodeLister != nil {
		goRun("node lister", func(ctx context.Context) error { a.nodeLister.Run(ctx); return nil })
	}
	goRun("pleg", func(ctx context.Context) error { a.pleg.Run(ctx); return nil })
	goRun("garbage collectors", func(ctx context.Context) error { a.gc.Run(ctx); return nil })
	goRun("eviction manager", func(ctx context.Context) error { a.eviction.Run(ctx); return nil })
	goRun("status", func(ctx context.Context) error { a.statuses.Run(ctx); return nil })
	goRun("log rotation", func(ctx context.Context) error { a.rotator.Run(ctx, a.cfg.ContainerLogMonitorInterval); return nil })
	if a.nodes != nil {
		goRun("node status", func(ctx context.Context) error { a.nodes.Run(ctx); return nil })
	}
	goRun("oom watcher", a.oom.Run)
	if a.cfg.PodManifestPath != "" {
		src := &config.ManifestDirSource{Path: a.cfg.PodManifestPath, NodeName: a.cfg.NodeName,
			Period: a.cfg.FileCheckFrequency, Set: a.config.Set, Log: a.log, RuntimeClasses: a.runtimeClasses}
		goRun("manifest dir", src.Run)
	}
	if a.cfg.ManifestURL != "" {
		src := &config.ManifestURLSource{URL: a.cfg.ManifestURL, Header: a.cfg.ManifestURLHeader, NodeName: a.cfg.NodeName,
			Period: a.cfg.HTTPCheckFrequency, Set: a.config.Set, Log: a.log, RuntimeClasses: a.runtimeClasses}
		goRun("manifest url", src.Run)
	}
	if a.client != nil {
		src := &config.APISource{Client: a.client, NodeName: a.cfg.NodeName, Set: a.config.Set}
		goRun("apiserver source", src.Run)
	}
	if a.cfg.HealthzPort > 0 {
		goRun("healthz", a.serveHealthz)
	}
	if a.api != nil {
		// The API is how people and the apiserver reach the node: when it fails, the agent stops.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.api.run(ctx); err != nil && ctx.Err() == nil {
				apiErr = fmt.Errorf("agent API: %w", err)
			}
			cancel()
		}()
	}
	metrics.SetNodeName(a.cfg.NodeName)
	a.log.Info("agent started", "node", a.cfg.NodeName, "runtime", a.cfg.ContainerRuntimeEndpoint, "sources", a.state.Sources())
	a.loop.Run(ctx)
	cancel()
	wg.Wait()
	return apiErr
}

// learnRuntime waits for the runtime to answer Version, then records its name for container IDs.
func (a *Agent) learnRuntime(ctx context.Context) error {
	for {
		v, err := a.runtime.Version(ctx, &runtimeapi.VersionRequest{})
		if err == nil {
			a.runtimeName.Store(v.RuntimeName)
			a.log.Info("container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion, "cri", v.RuntimeApiVersion)
			return nil
		}
		a.log.Warn("container runtime not answering yet", "endpoint", a.cfg.ContainerRuntimeEndpoint, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// runtimePodUIDs are the pods the runtime holds a sandbox of, whatever their state: a pod cgroup
// of one of them is no orphan.
func (a *Agent) runtimePodUIDs(ctx context.Context) (map[types.UID]bool, error) {
	resp, err := a.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]bool{}
	for _, s := range resp.Items {
		if uid := s.GetMetadata().GetUid(); uid != "" {
			out[types.UID(uid)] = true
		}
		if uid := s.Labels[kubecontainer.LabelPodUID]; uid != "" {
			out[types.UID(uid)] = true
		}
	}
	return out, nil
}

// imageFsMountpoint is where the runtime keeps images, from CRI ImageFsInfo: imagefs is measured
// there, and is nodefs when the runtime names none.
func imageFsMountpoint(svc interface {
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
}) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		fs, err := svc.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			return "", err
		}
		for _, f := range fs.ImageFilesystems {
			if f.GetFsId().GetMountpoint() != "" {
				return f.FsId.Mountpoint, nil
			}
		}
		return "", nil
	}
}

// reject fails a pod admission refused, with the kubelet's wording, and records the refusal as an
// event as the kubelet does (standalone: a log line, which outlives the status of a pod in no list).
func (a *Agent) reject(pod *v1.Pod, reason, message string) {
	a.events.Eventf(pod, v1.EventTypeWarning, reason, "%s", message)
	a.statuses.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message,
		StartTime: &metav1.Time{Time: time.Now()}})
}

// Healthz reports whether the SyncLoop and PLEG are alive.
func (a *Agent) Healthz() error {
	return errors.Join(a.loop.Healthy(), a.pleg.Healthy())
}

// HealthzHandler serves /healthz.
func (a *Agent) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthz(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
}

func (a *Agent) serveHealthz(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/healthz", a.HealthzHandler())
	srv := &http.Server{Addr: net.JoinHostPort(a.cfg.HealthzBindAddress, strconv.Itoa(a.cfg.HealthzPort)), Handler: mux,
		ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("healthz: %w", err)
	}
	return nil
}

// Pods returns the desired pods with their current statuses, for the agent's API and `nodelet get pods`.
func (a *Agent) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range a.pods.GetPods() {
		p = p.DeepCopy()
		if s, ok := a.statuses.GetPodStatus(p.UID); ok {
			p.Status = s
		}
		out = append(out, p)
	}
	return out
}

// NodeName is the name the agent runs as.
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// Pod returns one desired pod with its status (the agent's API reads it).
func (a *Agent) Pod(namespace, name string) (*v1.Pod, bool) {
	p, ok := a.pods.GetPodByFullName(kubecontainer.BuildPodFullName(name, namespace))
	if !ok {
		return nil, false
	}
	p = p.DeepCopy()
	if s, ok := a.statuses.GetPodStatus(p.UID); ok {
		p.Status = s
	}
	return p, true
}

// PodEvents returns the events recorded about a pod, for `nodelet describe`.
func (a *Agent) PodEvents(namespace, name string) []v1.Event {
	return a.events.PodEvents(namespace, name)
}

// Runtime is the CRI client the agent uses; the agent's API proxies exec/attach/logs through it.
func (a *Agent) Runtime() runtimeapi.RuntimeServiceClient { return a.runtime }
