// Package agent is wiring only: New builds every part of the agent from a Config and Deps, in one
// pass and each once, and Run starts them. The parts are pod sources → SyncLoop → pod workers →
// runtime manager → CRI, with PLEG, the status manager, the node's resource managers, admission,
// eviction, the garbage collectors, the API and (in a cluster) node status and mirror pods beside
// them, each in its own package with its own logic; what is left here is which part each seam
// gets (a cluster's or a standalone node's, with or without a cgroup root) and what Run starts.
//
// The agent talks to a runtime only through CRI gRPC; no package under agent/ imports runtime/
// (boundary_test.go enforces it).
package agent

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/allocation"
	"github.com/nodelet/nodelet/agent/cadvisor"
	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/cm/cpumanager"
	"github.com/nodelet/nodelet/agent/cm/devicemanager"
	"github.com/nodelet/nodelet/agent/cm/qos"
	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/credentials"
	"github.com/nodelet/nodelet/agent/csi"
	"github.com/nodelet/nodelet/agent/eviction"
	"github.com/nodelet/nodelet/agent/gc"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
	"github.com/nodelet/nodelet/agent/kubeclient"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/kuberuntime"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/oomwatcher"
	"github.com/nodelet/nodelet/agent/pleg"
	"github.com/nodelet/nodelet/agent/pluginmanager"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podobjects"
	"github.com/nodelet/nodelet/agent/podresources"
	"github.com/nodelet/nodelet/agent/podsource"
	"github.com/nodelet/nodelet/agent/podstate"
	"github.com/nodelet/nodelet/agent/podsync"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/prober"
	"github.com/nodelet/nodelet/agent/recorder"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/services"
	"github.com/nodelet/nodelet/agent/stats"
	"github.com/nodelet/nodelet/agent/status"
	"github.com/nodelet/nodelet/agent/syncloop"
	"github.com/nodelet/nodelet/agent/userns"
	"github.com/nodelet/nodelet/agent/volumemanager"
	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// Deps are what a test or an embedding program may hand the agent instead of letting it make them.
type Deps struct {
	// KubeClient overrides Config.Kubeconfig (tests pass an adapted fake clientset).
	KubeClient kubeclient.Interface
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

// Agent is the assembled agent: New builds every part, Run starts them. It keeps what Run reads,
// the views its accessors hand out, and the parts its tests ask directly.
type Agent struct {
	cfg  agentconfig.Config
	log  *slog.Logger
	conn *grpc.ClientConn

	events    *recorder.History
	state     *podstate.View
	admission *admission.Chain
	userns    *userns.Manager
	pleg      *pleg.GenericPLEG
	loop      *syncloop.SyncLoop
	api       *server.Serving // nil when the configuration asks for no API
	// parts are what Run starts beside the SyncLoop and the API, in order.
	parts []part
}

// New builds the agent and every part of it, each once and complete, in the order they need each
// other; nothing runs until Run.
func New(cfg agentconfig.Config, deps Deps) (_ *Agent, err error) {
	if err := agentconfig.Complete(&cfg); err != nil {
		return nil, err
	}
	log := cmp.Or(deps.Log, slog.Default())
	sysctls, err := sysctl.New(cfg.Kubelet.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	conn, err := kuberuntime.Dial(cfg.Kubelet.ContainerRuntimeEndpoint, cfg.Kubelet.RuntimeRequestTimeout.Duration)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	a := &Agent{cfg: cfg, log: log, conn: conn}
	runtime, imageService := runtimeapi.NewRuntimeServiceClient(a.conn), runtimeapi.NewImageServiceClient(a.conn)
	client := deps.KubeClient // nil standalone
	if client == nil && cfg.Kubeconfig != "" {
		c, err := kubeclient.Load(cfg.Kubeconfig, cfg.KubeAPIQPS, int(cfg.Kubelet.KubeAPIBurst), cfg.Kubelet.ContentType)
		if err != nil {
			return nil, err
		}
		client = c
	}
	housekeeping := cmp.Or(deps.HousekeepingPeriod, syncloop.DefaultHousekeepingPeriod)

	// Events: posted to the apiserver in a cluster (by sender), logged standalone; kept either way.
	var sender *recorder.Recorder
	a.events, sender = recorder.ForNode(client, cfg.NodeName, log)

	// The pods: desired, as their sources list them, their workers' phases, statuses, allocations.
	pods := podmanager.New()
	statuses := status.NewManager(client, pods, log)
	sources := podsource.New(cfg, client, log)
	phases := podworkers.NewPhases()
	allocs, err := allocation.OpenState(cfg.RootDir, log)
	if err != nil {
		return nil, err
	}
	a.state = podstate.New(pods, phases, statuses, sources.Merged, sources.Names, allocs)

	// The node's resources, admission and eviction.
	dns, err := kuberuntime.NewDNSConfigurer(cfg.Kubelet.ClusterDNS, cfg.Kubelet.ClusterDomain, *cfg.Kubelet.ResolverConfig)
	if err != nil {
		log.Warn("pods with dnsPolicy Default get no resolver settings", "err", err)
	}
	nodeCM, err := cm.New(cm.Config{MaxPods: int(cfg.Kubelet.MaxPods), PodsPerCore: int(cfg.Kubelet.PodsPerCore), RootDir: cfg.RootDir,
		SystemReserved: cfg.SystemReservedList, KubeReserved: cfg.KubeReservedList, HardEvictionThresholds: cfg.EvictionThresholds,
		EnforceNodeAllocatable: cfg.Kubelet.EnforceNodeAllocatable, PodsCgroup: cfg.PodsCgroup,
		SystemReservedCgroup: cfg.Kubelet.SystemReservedCgroup, KubeReservedCgroup: cfg.Kubelet.KubeReservedCgroup},
		cm.Deps{Cgroups: deps.Cgroups, Recorder: a.events, Node: nodestatus.Ref(cfg.NodeName), Log: log})
	if err != nil {
		return nil, err
	}
	cpus, err := cpumanager.NewForNode(cpumanager.NodeConfig{Policy: cfg.Kubelet.CPUManagerPolicy, Options: cfg.Kubelet.CPUManagerPolicyOptions,
		ReconcilePeriod: cfg.Kubelet.CPUManagerReconcilePeriod.Duration, ReservedSystemCPUs: cfg.Kubelet.ReservedSystemCPUs,
		SystemReserved: cfg.SystemReservedList, KubeReserved: cfg.KubeReservedList, TopologyManagerPolicy: cfg.Kubelet.TopologyManagerPolicy,
		StateDir: cfg.RootDir},
		cpumanager.Deps{Topology: deps.CPUTopology, Runtime: runtime, Holds: a.state.HoldsCPUs, SourcesReady: a.state.SourcesReady, Log: log})
	if err != nil {
		return nil, err
	}
	staticCPUs := cpus.Policy() == cpumanager.PolicyStatic
	devices := devicemanager.New(devicemanager.Dir(cfg.RootDir), devicemanager.Deps{Holds: a.state.HoldsCPUs,
		SourcesReady: a.state.SourcesReady, Running: devicemanager.RunningContainers(runtime), Log: log})
	allocatable := devices.Allocatable(nodeCM.Allocatable) // admission counts the plugins' devices
	vols := &volumemanager.Manager{Client: client, RootDir: cfg.RootDir, Recorder: a.events, Allocatable: nodeCM.Allocatable}
	if client != nil {
		vols.Claims = client
	}
	metrics.VolumeStats(vols.ClaimStats) // kubelet_volume_stats_* of the claims pods use
	var csiClient csi.Client             // standalone: no CSINode, no persistent volumes
	if client != nil {
		csiClient = client
	}
	csiVolumes := csi.New(csi.Config{NodeName: cfg.NodeName, RootDir: cfg.RootDir, Client: csiClient, Secrets: vols.SecretData,
		Token: vols.TokenStatus, Log: log})
	vols.CSI = csiVolumes
	if client == nil && cfg.Kubelet.StaticPodPath != "" {
		// Standalone: secrets and config maps sit beside the static pod manifests.
		vols.Objects = &volumemanager.DirObjects{Dir: cfg.Kubelet.StaticPodPath}
	}
	imageGC := &images.ImageGC{Images: imageService, Containers: runtime, Log: log, Keep: []string{cfg.PodInfraContainerImage},
		Policy: images.GCPolicy{HighThresholdPercent: int(*cfg.Kubelet.ImageGCHighThresholdPercent), LowThresholdPercent: int(*cfg.Kubelet.ImageGCLowThresholdPercent),
			MinAge: cfg.Kubelet.ImageMinimumGCAge.Duration}}
	containerGC := &containergc.GC{Runtime: runtime, Pods: containergc.DeletedFunc(a.state.Gone), PodLogsDir: cfg.Kubelet.PodLogsDir, Log: log,
		Policy: containergc.Policy{MinAge: cfg.MinimumContainerTTL, MaxPerPodContainer: cfg.MaxPerPodContainer, MaxContainers: cfg.MaxContainers}}
	summary := stats.New(runtime, stats.Options{NodeName: cfg.NodeName, RootDir: cfg.RootDir,
		LogDir: cfg.Kubelet.PodLogsDir, PodsCgroup: cfg.PodsCgroup, Claims: vols})
	machine := &eviction.Machine{RootDir: cfg.RootDir, ImageFs: eviction.ImageFsMountpoint(imageService), PodsCgroup: cfg.PodsCgroup}
	if cfg.Kubelet.KernelMemcgNotification {
		if err := machine.CheckMemcgNotification(); err != nil {
			return nil, fmt.Errorf("kernelMemcgNotification: %w", err)
		}
	}
	kills := syncloop.NewKills() // evictions reach the pod workers through the SyncLoop
	evictions := eviction.New(eviction.Config{Thresholds: cfg.EvictionThresholds, NodeName: cfg.NodeName,
		PressureTransitionPeriod: cfg.Kubelet.EvictionPressureTransitionPeriod.Duration, MaxPodGracePeriodSeconds: int64(cfg.Kubelet.EvictionMaxPodGracePeriod),
		MonitoringInterval: cfg.EvictionMonitoringInterval, KernelMemcgNotification: cfg.Kubelet.KernelMemcgNotification},
		eviction.Deps{Measurer: machine, Notifier: machine,
			Stats: eviction.SummaryStats{Pods: summary.PodStats}, ActivePods: a.state.AllocatedPods, Kill: kills.Evict,
			DeleteDeadContainers: containerGC.DeleteDeadContainers, DeleteUnusedImages: imageGC.DeleteUnusedImages,
			Recorder: a.events, Evicted: metrics.Evicted, Log: log, PodCleanedUp: a.state.PodCleanedUp,
			StorageStats: summary.PodStats})
	var nodeLister *admission.NodeLister
	var ownNode admission.NodeFunc  // standalone: the Node this machine would register
	var objects *podobjects.Manager // the Secrets and ConfigMaps of pods, from the apiserver
	if err := podobjects.CheckStrategy(string(cfg.Kubelet.ConfigMapAndSecretChangeDetectionStrategy)); err != nil {
		return nil, err
	}
	if client != nil {
		nodeLister = admission.NewNodeLister(client, cfg.NodeName)
		ownNode = nodeLister.Get
		objects, err = podobjects.New(client, podobjects.Config{Strategy: string(cfg.Kubelet.ConfigMapAndSecretChangeDetectionStrategy),
			SyncFrequency: cfg.Kubelet.SyncFrequency.Duration, Node: ownNode, Log: log})
		if err != nil {
			return nil, err
		}
		vols.Objects = objects
	}
	a.admission = admission.NewChain(admission.Parts{Eviction: evictions, Sysctls: sysctls, MaxPods: int(cfg.Kubelet.MaxPods),
		Predicates: admission.New(admission.AnyWay(ownNode, admission.LocalNode(cfg.NodeName, cfg.NodeLabels, cfg.Kubelet.RegisterWithTaints)),
			allocatable),
		AppArmor: admission.NewAppArmor(nil), CPUs: cpus, Devices: devices}, a.state)
	// In-place resize: pods are admitted through the allocation manager, beside the others'
	// allocations. Under the static CPU policy a Guaranteed pod's cpu resize is Infeasible.
	alloc, err := allocation.New(allocation.Deps{State: allocs, Admit: a.admission.Admit, ActivePods: a.state.ActivePods,
		Allocatable: nodeCM.AllocatableAbsolute, Recorder: a.events, Log: log, StaticCPUPolicy: func() bool { return staticCPUs }})
	if err != nil {
		return nil, err
	}

	// The pods' containers: the runtime manager and what it asks.
	probes := prober.New(runtime, a.events, log)
	if a.userns, err = userns.New(userns.Config{RootDir: cfg.RootDir, MaxPods: int(cfg.Kubelet.MaxPods),
		Handlers: userns.RuntimeHandlers{Runtime: runtime}, Log: log}); err != nil {
		return nil, fmt.Errorf("create user namespace manager: %w", err)
	}
	var (
		podQOS        *qos.Manager // nil when the runtime places pods (no cgroup root)
		runtimeCgroup kuberuntime.PodCgroups
		syncCgroups   podsync.PodCgroups
	)
	if cfg.PodsCgroup != "" {
		podQOS = qos.New(qos.Config{Root: cfg.PodsCgroup, PodPidsLimit: *cfg.Kubelet.PodPidsLimit},
			qos.Deps{Cgroups: deps.Cgroups, ActivePods: a.state.ActivePods, RuntimePods: qos.RuntimeSandboxes(runtime), Log: log})
		runtimeCgroup, syncCgroups = podQOS, podQOS
	}
	var cpuSets kuberuntime.CPUSets
	if staticCPUs {
		cpuSets = cpus
	}
	var classes kuberuntime.RuntimeClasses
	var apiClasses *kuberuntime.APIRuntimeClasses
	var serviceEnv kuberuntime.ServiceLister
	var serviceLister *services.Lister // containers get the cluster's Service variables; only a cluster has Services
	switch {
	case client != nil:
		apiClasses = kuberuntime.NewAPIRuntimeClasses(client)
		classes = apiClasses
		serviceLister = services.New(client)
		serviceEnv = serviceLister
	case sources.RuntimeClasses != nil:
		classes = sources.RuntimeClasses
	}
	reasons := kubecontainer.NewReasonCache()
	serialize := *cfg.Kubelet.SerializeImagePulls
	manager := kuberuntime.NewManager(kuberuntime.Deps{
		Runtime: runtime, Images: imageService, Recorder: a.events, Reasons: reasons, Log: log,
		RootDir: cfg.RootDir, SeccompDefault: *cfg.Kubelet.SeccompDefault, PodLogsDir: cfg.Kubelet.PodLogsDir, NodeName: cfg.NodeName,
		NodeIPs: cfg.NodeIPs, DNS: dns, CgroupRoot: cfg.PodsCgroup, Cgroups: deps.Cgroups, Volumes: vols, EnvData: vols, SubPaths: vols,
		RuntimeClasses: classes, Credentials: &credentials.Keyring{Secrets: vols}, Probes: probes, Allocation: alloc,
		PodCgroups: runtimeCgroup, ImagePulls: images.Options{SerializeImagePulls: &serialize, MaxParallelImagePulls: *cfg.Kubelet.MaxParallelImagePulls,
			Used: imageGC.MarkUsed},
		Services: serviceEnv, Allocatable: nodeCM.Allocatable, CPUs: cpuSets, Userns: a.userns, Devices: devices,
	})
	collectors := gc.New(gc.Periods{PodDirs: housekeeping, Containers: deps.ContainerGCPeriod, Images: deps.ImageGCPeriod},
		gc.Deps{Containers: containerGC, Images: imageGC, Runtime: manager, PodDirs: vols, Userns: a.userns, Gone: a.state.Gone,
			Node: nodestatus.Ref(cfg.NodeName), Recorder: a.events, Log: log})

	// The node: its status (kept standalone too, for the API; only a registering agent posts it).
	nodeDeps := nodestatus.Deps{Runtime: runtime, Images: imageService, Recorder: a.events,
		NodeName: cfg.NodeName, Labels: cfg.NodeLabels, Taints: cfg.Kubelet.RegisterWithTaints, RootDir: cfg.RootDir, PodCIDR: cfg.Kubelet.PodCIDR,
		NodeIPs: cfg.NodeIPs, MaxPods: int(cfg.Kubelet.MaxPods), StatusUpdateFrequency: cfg.Kubelet.NodeStatusUpdateFrequency.Duration,
		StatusReportFrequency: cfg.Kubelet.NodeStatusReportFrequency.Duration,
		LeaseDurationSeconds:  cfg.Kubelet.NodeLeaseDurationSeconds, Log: log, Pressure: evictions.NodeConditions, Resources: nodeCM.Resources,
		Devices: devices, VolumesInUse: csiVolumes.VolumesInUse}
	if client != nil && *cfg.Kubelet.RegisterNode {
		nodeDeps.Client = client
		nodeDeps.Watched = ownNode
	}
	nodes := nodestatus.New(nodeDeps)
	oom := &oomwatcher.Watcher{Node: nodestatus.Ref(cfg.NodeName), CgroupRoot: cfg.PodsCgroup, Recorder: a.events, Log: log}
	var syncMirrors podsync.MirrorClient
	var loopMirrors syncloop.MirrorDeleter
	if client != nil {
		m := &podmanager.MirrorClient{Client: client, NodeName: cfg.NodeName, NodeUID: nodes.NodeUID}
		syncMirrors, loopMirrors = m, m
	}

	// The pod workers and the loop that wakes them.
	// The agent keeps pod cgroups (cgroupfs) only when it has a pods cgroup.
	runtimeName := kuberuntime.NewRuntimeName(runtime, cfg.Kubelet.ContainerRuntimeEndpoint, cfg.PodsCgroup != "", log)
	syncer := &podsync.Syncer{Runtime: manager, Status: statuses, Pods: pods, Volumes: vols, Reasons: reasons,
		Prober: probes, Recorder: a.events, RuntimeName: runtimeName.Get, NodeIPs: cfg.NodeIPs, Mirrors: syncMirrors,
		Cgroups: syncCgroups, Allocation: alloc, RootDir: cfg.RootDir, Userns: a.userns, Log: log,
		RecursiveReadOnly: manager.SupportsRecursiveReadOnlyMounts}
	if objects != nil {
		syncer.Objects = objects
	}
	workers := podworkers.New(syncer, phases, log)
	a.pleg = pleg.New(runtime, pleg.Options{Log: log, RelistPeriod: deps.RelistPeriod})
	a.loop = syncloop.New(syncloop.Deps{
		Updates: sources.Merged.Updates(), PLEG: a.pleg.Watch(), Probes: probes.Updates(), Pods: pods, Workers: workers,
		Runtime: manager, Statuses: statuses, Mirrors: loopMirrors, Admit: alloc.AddPod, Recorder: a.events,
		SourcesReady: a.state.SourcesReady, SourceHandled: sources.Merged.SourceHandled, Kills: kills, Evicted: syncer,
		BackOffs: manager, Events: a.events, Listed: sources.Merged, Resizes: alloc,
		SyncFrequency: cfg.Kubelet.SyncFrequency.Duration, HousekeepingPeriod: housekeeping, Log: log,
	})
	rotator, err := logs.NewRotator(runtime, cfg.Kubelet.ContainerLogMaxSize, *cfg.Kubelet.ContainerLogMaxFiles)
	if err != nil {
		return nil, err
	}
	cgroupFS := cgroupfs.Host()
	if deps.Cgroups != nil {
		cgroupFS = deps.Cgroups.FS()
	}
	if a.api, err = server.NewServing(cfg, client, server.Deps{Pods: a.state, Events: a.events, Node: node{nodes, a.events},
		Runtime: runtime, SyncLoopHealthy: a.Healthz, Summary: summary.Summary,
		Cadvisor: cadvisor.NewRegistry(cadvisor.New(cadvisor.Config{FS: cgroupFS, PodsCgroup: cfg.PodsCgroup, Runtime: runtime, Log: log}))},
		log); err != nil {
		return nil, err
	}

	podResources := podresources.New(podresources.Deps{Pods: a.state, Devices: devices, CPUs: cpus, Log: log})
	plugins := pluginmanager.New(pluginmanager.Dir(cfg.RootDir), map[string]pluginmanager.Handler{registerapi.DevicePlugin: devices,
		registerapi.CSIPlugin: csiVolumes}, log)
	a.parts = []part{{"node allocatable", loop(nodeCM.Run)}, {"CPU manager", loop(cpus.Run)},
		{"device manager", vital(devices.Run)},
		{"pod resources", vital(func(ctx context.Context) error { return podResources.Serve(ctx, podresources.SocketPath(cfg.RootDir)) })},
		{"plugin manager", plugins.Run}, {"CSINode", loop(csiVolumes.Run)}}
	if podQOS != nil {
		a.parts = append(a.parts, part{"QoS cgroups", loop(podQOS.Run)})
	}
	a.parts = append(a.parts, part{"runtime version", vital(runtimeName.Run)}, part{"pod workers", loop(workers.Run)},
		part{"prober", loop(probes.Run)})
	if sender != nil {
		a.parts = append(a.parts, part{"events", loop(sender.Run)})
	}
	if serviceLister != nil {
		a.parts = append(a.parts, part{"services", loop(serviceLister.Run)}, part{"runtime classes", loop(apiClasses.Run)})
	}
	if nodeLister != nil {
		a.parts = append(a.parts, part{"node lister", loop(nodeLister.Run)}, part{"pod objects", loop(objects.Run)})
	}
	a.parts = append(a.parts, part{"pleg", loop(a.pleg.Run)}, part{"garbage collectors", loop(collectors.Run)},
		part{"eviction manager", loop(evictions.Run)}, part{"status", loop(statuses.Run)},
		part{"log rotation", loop(func(ctx context.Context) { rotator.Run(ctx, cfg.Kubelet.ContainerLogMonitorInterval.Duration) })},
		part{"node status", loop(nodes.Run)}, part{"oom watcher", oom.Run})
	for _, s := range sources.Runners {
		a.parts = append(a.parts, part{s.Name, s.Run})
	}
	if *cfg.Kubelet.HealthzPort > 0 {
		a.parts = append(a.parts, part{"healthz", func(ctx context.Context) error {
			return server.ServeHealthz(ctx, cfg.Kubelet.HealthzBindAddress, *cfg.Kubelet.HealthzPort, a.Healthz)
		}})
	}
	return a, nil
}
