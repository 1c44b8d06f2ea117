// Package agentconfig is the agent's configuration: flags named like the kubelet's, and a --config
// file in the kubelet's own KubeletConfiguration format (kubelet.config.k8s.io/v1beta1), decoded
// strictly so a misspelt field is an error rather than a silently ignored setting. Flags given on the
// command line win over the file, as with the kubelet.
package agentconfig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/agent/eviction"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
)

// Defaults. The agent keeps its state apart from the runtime's (/var/lib/nodelet/runtime) so either
// can be wiped alone.
const (
	DefaultRuntimeEndpoint = "unix:///run/nodelet/runtime.sock"
	DefaultRootDir         = "/var/lib/nodelet/agent"
	DefaultPodLogsDir      = "/var/log/pods"
	DefaultMaxPods         = 110
	DefaultResolvConf      = "/etc/resolv.conf"
	DefaultCgroupRoot      = "/kubepods"
	DefaultHealthzPort     = 10248
	// DefaultPodInfraContainerImage is the kubelet's: image GC leaves it alone.
	DefaultPodInfraContainerImage = "registry.k8s.io/pause:3.10"
)

// Config is the resolved configuration the agent runs with.
type Config struct {
	ContainerRuntimeEndpoint string
	RuntimeRequestTimeout    time.Duration

	PodManifestPath    string
	FileCheckFrequency time.Duration
	ManifestURL        string
	ManifestURLHeader  map[string][]string
	HTTPCheckFrequency time.Duration

	Kubeconfig       string
	HostnameOverride string
	// NodeName is HostnameOverride or the lower-cased hostname; never looked up in DNS.
	NodeName     string
	NodeIPs      []string
	RegisterNode bool

	RootDir    string
	PodLogsDir string
	MaxPods    int
	// PodCIDR is handed to the runtime when standalone (a cluster's Node spec.podCIDRs are in one).
	PodCIDR string

	SyncFrequency             time.Duration
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency: an unchanged status is posted this often (the kubelet's default
	// 5m, or nodeStatusUpdateFrequency when only that is set).
	NodeStatusReportFrequency time.Duration
	NodeLeaseDurationSeconds  int32

	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string

	// CgroupRoot is the parent of the pods' QoS cgroups (cgroupfs layout); "" leaves placement to the runtime.
	CgroupRoot string

	HealthzBindAddress string
	HealthzPort        int

	// Image pulls and image GC, named as the KubeletConfiguration's fields.
	SerializeImagePulls         bool
	MaxParallelImagePulls       int32 // 0: no bound (when not serialized)
	ImageGCHighThresholdPercent int
	ImageGCLowThresholdPercent  int
	ImageMinimumGCAge           time.Duration
	// PodInfraContainerImage is never collected (the runtime's sandbox image).
	PodInfraContainerImage string

	// Container GC, as the kubelet's (deprecated, flag-only) settings.
	MinimumContainerTTL time.Duration
	MaxPerPodContainer  int // dead containers kept per container of a live pod; <0 no limit
	MaxContainers       int // dead containers kept in all; <0 no limit

	// Eviction, named as the KubeletConfiguration's fields (map forms: signal → value). A flag or
	// file that sets EvictionHard replaces the defaults as a whole, as the kubelet's flag does.
	EvictionHard                     map[string]string
	EvictionSoft                     map[string]string
	EvictionSoftGracePeriod          map[string]string
	EvictionMinimumReclaim           map[string]string
	EvictionMaxPodGracePeriod        int32
	EvictionPressureTransitionPeriod time.Duration
	// EvictionMonitoringInterval is how often the eviction manager reads signals; the kubelet's is
	// a fixed 10s, which tests shorten.
	EvictionMonitoringInterval time.Duration
	// KernelMemcgNotification (kernelMemcgNotification) also wakes the eviction manager when
	// memory crosses a threshold, through cgroup v1's memory thresholds; refused elsewhere.
	KernelMemcgNotification bool
	// EvictionThresholds are the parsed thresholds; Complete fills them.
	EvictionThresholds []eviction.Threshold

	// AllowedUnsafeSysctls are sysctls (or prefixes ending in "*") pods may set beyond the safe set.
	AllowedUnsafeSysctls []string
	// SeccompDefault (seccompDefault, --seccomp-default) runs containers without a seccomp profile
	// RuntimeDefault instead of Unconfined.
	SeccompDefault bool

	// NodeLabels are added to the Node at registration (--node-labels); RegisterWithTaints are
	// its taints at registration (--register-with-taints, registerWithTaints).
	NodeLabels         map[string]string
	RegisterWithTaints []v1.Taint

	// The apiserver client (kubeAPIQPS, kubeAPIBurst, contentType); an empty ContentType keeps
	// client-go's JSON.
	KubeAPIQPS   float32
	KubeAPIBurst int
	ContentType  string

	// Container log rotation (containerLogMaxSize, containerLogMaxFiles, containerLogMonitorInterval).
	ContainerLogMaxSize         string
	ContainerLogMaxFiles        int32
	ContainerLogMonitorInterval time.Duration

	// Node allocatable, named as the KubeletConfiguration's fields. SystemReserved and KubeReserved
	// are cpu, memory, ephemeral-storage and pid amounts; Complete parses them into
	// SystemReservedList and KubeReservedList. EnforceNodeAllocatable nil is the kubelet's default:
	// [pods] when pods get cgroups (CgroupRoot set), none otherwise.
	SystemReserved, KubeReserved             map[string]string
	SystemReservedList, KubeReservedList     v1.ResourceList
	EnforceNodeAllocatable                   []string
	SystemReservedCgroup, KubeReservedCgroup string

	// PodsPerCore (> 0) bounds the pods capacity to that many per CPU, below MaxPods.
	PodsPerCore int

	// PodPidsLimit (> 0) caps the processes of each pod's cgroup (podPidsLimit, --pod-max-pids).
	PodPidsLimit int64

	// The CPU manager (cpuManagerPolicy, cpuManagerPolicyOptions, cpuManagerReconcilePeriod,
	// reservedSystemCPUs): "none" (the default) or "static". ReservedSystemCPUs, a cpuset list,
	// also replaces the cpu of systemReserved and kubeReserved by its size, as in the kubelet.
	CPUManagerPolicy          string
	CPUManagerPolicyOptions   map[string]string
	CPUManagerReconcilePeriod time.Duration
	ReservedSystemCPUs        string
	// The topology manager (topologyManagerPolicy, topologyManagerScope): none, or
	// single-numa-node, which a machine with one NUMA node always satisfies.
	TopologyManagerPolicy string
	TopologyManagerScope  string

	// FailSwapOn and FailCgroupV1 refuse to start on a host with swap on, or with cgroup v1.
	FailSwapOn   bool
	FailCgroupV1 bool

	// EnableSystemLogHandler serves the host's /var/log under the API's /logs/
	// (enableSystemLogHandler); false answers there as the kubelet does with it off.
	EnableSystemLogHandler bool

	// APISocket is the root-only unix socket of the agent's API; "" serves none.
	APISocket string
	// Serving is the API's HTTPS listener; its zero value (port 0, as Default has it) serves none.
	// The commands start from DefaultServing.
	Serving Serving
}

// Default is the configuration with no flags and no file.
func Default() Config {
	return Config{
		ContainerRuntimeEndpoint:  DefaultRuntimeEndpoint,
		RuntimeRequestTimeout:     2 * time.Minute,
		FileCheckFrequency:        20 * time.Second,
		HTTPCheckFrequency:        20 * time.Second,
		RegisterNode:              true,
		RootDir:                   DefaultRootDir,
		PodLogsDir:                DefaultPodLogsDir,
		MaxPods:                   DefaultMaxPods,
		SyncFrequency:             time.Minute,
		NodeStatusUpdateFrequency: 10 * time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
		NodeLeaseDurationSeconds:  40,
		ResolvConf:                DefaultResolvConf,
		CgroupRoot:                DefaultCgroupRoot,
		HealthzBindAddress:        "127.0.0.1",
		HealthzPort:               DefaultHealthzPort,

		SerializeImagePulls:         true,
		ImageGCHighThresholdPercent: 85,
		ImageGCLowThresholdPercent:  80,
		ImageMinimumGCAge:           2 * time.Minute,

		CPUManagerPolicy:          "none",
		CPUManagerReconcilePeriod: 10 * time.Second,
		TopologyManagerPolicy:     "none",
		TopologyManagerScope:      "container",
		PodInfraContainerImage:    DefaultPodInfraContainerImage,
		MaxPerPodContainer:        1,
		MaxContainers:             -1,

		KubeAPIQPS:   50,
		KubeAPIBurst: 100,

		ContainerLogMaxSize:         "10Mi",
		ContainerLogMaxFiles:        5,
		ContainerLogMonitorInterval: 10 * time.Second,

		EvictionHard:                     eviction.DefaultEvictionHard(),
		EvictionPressureTransitionPeriod: eviction.DefaultPressureTransitionPeriod,
		EvictionMonitoringInterval:       eviction.DefaultMonitoringInterval,

		EnableSystemLogHandler: true,
	}
}

// Flags binds the command line.
type Flags struct {
	fs         *pflag.FlagSet
	configFile string
	nodeIP     string
	taints     []string
	// The eviction flags in the kubelet's forms: "memory.available<100Mi,…" and "signal=value,…".
	evictionHard, evictionSoft, evictionSoftGrace, evictionMinReclaim string
	cfg                                                               Config
}

// AddFlags registers the kubelet-named flags on fs.
func AddFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs, cfg: Default()}
	c := &f.cfg
	fs.StringVar(&f.configFile, "config", "", "a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override it")
	fs.StringVar(&c.ContainerRuntimeEndpoint, "container-runtime-endpoint", c.ContainerRuntimeEndpoint, "the CRI endpoint (unix://path)")
	fs.DurationVar(&c.RuntimeRequestTimeout, "runtime-request-timeout", c.RuntimeRequestTimeout, "timeout of each CRI request except pulls")
	fs.StringVar(&c.PodManifestPath, "pod-manifest-path", "", "a folder (or file) of static pod manifests")
	fs.StringVar(&c.ManifestURL, "manifest-url", "", "a URL serving a Pod or PodList, polled")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to join; none runs standalone")
	fs.StringVar(&c.HostnameOverride, "hostname-override", "", "the node name to use instead of the hostname")
	fs.StringVar(&f.nodeIP, "node-ip", "", "the node's IP address(es), comma-separated (no DNS lookup is ever made for it)")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "the agent's state folder (pods/<uid>/volumes live under it)")
	fs.StringVar(&c.PodLogsDir, "pod-logs-dir", c.PodLogsDir, "where containers' logs are written (CRI log layout)")
	fs.IntVar(&c.MaxPods, "max-pods", c.MaxPods, "the most pods this node runs")
	fs.StringVar(&c.PodCIDR, "pod-cidr", "", "standalone: the pod CIDR(s) handed to the runtime's default network (in a cluster the Node's spec.podCIDRs are)")
	fs.DurationVar(&c.SyncFrequency, "sync-frequency", c.SyncFrequency, "the periodic resync of every pod")
	fs.StringSliceVar(&c.ClusterDNS, "cluster-dns", nil, "DNS servers for ClusterFirst pods")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", "", "the cluster's DNS domain")
	fs.StringVar(&c.ResolvConf, "resolv-conf", c.ResolvConf, "the resolver file pods with dnsPolicy Default use")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, "parent cgroup of the pods' QoS cgroups; empty lets the runtime choose")
	fs.IntVar(&c.HealthzPort, "healthz-port", c.HealthzPort, "port of /healthz; 0 disables")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "address of /healthz")
	fs.BoolVar(&c.RegisterNode, "register-node", c.RegisterNode, "register the Node with the apiserver")
	fs.BoolVar(&c.SerializeImagePulls, "serialize-image-pulls", c.SerializeImagePulls, "pull one image at a time")
	fs.Int32Var(&c.MaxParallelImagePulls, "max-parallel-image-pulls", c.MaxParallelImagePulls, "most parallel pulls when not serialized (0: no bound)")
	fs.IntVar(&c.ImageGCHighThresholdPercent, "image-gc-high-threshold", c.ImageGCHighThresholdPercent, "image filesystem usage percent that starts image GC (100 disables it)")
	fs.IntVar(&c.ImageGCLowThresholdPercent, "image-gc-low-threshold", c.ImageGCLowThresholdPercent, "image filesystem usage percent image GC frees down to")
	fs.DurationVar(&c.ImageMinimumGCAge, "minimum-image-ttl-duration", c.ImageMinimumGCAge, "an unused image younger than this is not collected")
	fs.StringVar(&c.PodInfraContainerImage, "pod-infra-container-image", c.PodInfraContainerImage, "the runtime's sandbox image, which image GC never removes")
	fs.DurationVar(&c.MinimumContainerTTL, "minimum-container-ttl-duration", c.MinimumContainerTTL, "a dead container younger than this is not collected")
	fs.IntVar(&c.MaxPerPodContainer, "maximum-dead-containers-per-container", c.MaxPerPodContainer, "dead containers kept per container (<0: no limit)")
	fs.IntVar(&c.MaxContainers, "maximum-dead-containers", c.MaxContainers, "dead containers kept in all (<0: no limit)")
	fs.StringSliceVar(&c.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", nil, "unsafe sysctls or patterns ending in * (e.g. 'kernel.msg*,net.core.somaxconn') pods may set")
	fs.BoolVar(&c.SeccompDefault, "seccomp-default", c.SeccompDefault, "containers without a seccomp profile run the runtime's default profile (RuntimeDefault) instead of Unconfined")
	fs.StringToStringVar(&c.NodeLabels, "node-labels", nil, "labels added to the Node when it registers (key=value,...); kubernetes.io and k8s.io keys only as the kubelet allows them")
	fs.StringVar(&f.evictionHard, "eviction-hard", eviction.FormatMap(c.EvictionHard, "<"), "hard eviction thresholds (signal<quantity or percentage, comma-separated); replaces the defaults")
	fs.StringVar(&f.evictionSoft, "eviction-soft", "", "soft eviction thresholds (e.g. memory.available<1.5Gi); each needs a grace period")
	fs.StringVar(&f.evictionSoftGrace, "eviction-soft-grace-period", "", "how long each soft threshold must hold before pods are evicted (e.g. memory.available=1m30s)")
	fs.StringVar(&f.evictionMinReclaim, "eviction-minimum-reclaim", "", "how far below a threshold eviction reclaims (e.g. imagefs.available=2Gi)")
	fs.Int32Var(&c.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", c.EvictionMaxPodGracePeriod, "longest grace period, in seconds, a pod evicted for a soft threshold gets")
	fs.DurationVar(&c.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", c.EvictionPressureTransitionPeriod, "how long a pressure condition stays after its threshold was last met")
	fs.Float32Var(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS, "queries per second to the apiserver (negative: no limit)")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "burst of queries to the apiserver")
	fs.StringVar(&c.ContentType, "kube-api-content-type", c.ContentType, "content type of requests to the apiserver (e.g. application/vnd.kubernetes.protobuf)")
	fs.StringVar(&c.ContainerLogMaxSize, "container-log-max-size", c.ContainerLogMaxSize, "a container's log is rotated past this size (quantity, e.g. 10Mi)")
	fs.Int32Var(&c.ContainerLogMaxFiles, "container-log-max-files", c.ContainerLogMaxFiles, "log files kept per container (at least 2)")
	fs.StringToStringVar(&c.SystemReserved, "system-reserved", nil, "resources kept for the system's daemons (cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000)")
	fs.StringToStringVar(&c.KubeReserved, "kube-reserved", nil, "resources kept for the Kubernetes daemons, as --system-reserved")
	fs.StringSliceVar(&c.EnforceNodeAllocatable, "enforce-node-allocatable", nil, "what is capped by cgroups: pods, system-reserved, kube-reserved (or their -compressible forms), or none (default: pods)")
	fs.StringVar(&c.SystemReservedCgroup, "system-reserved-cgroup", "", "the existing cgroup system-reserved enforcement writes --system-reserved on")
	fs.StringVar(&c.KubeReservedCgroup, "kube-reserved-cgroup", "", "the existing cgroup kube-reserved enforcement writes --kube-reserved on")
	fs.IntVar(&c.PodsPerCore, "pods-per-core", c.PodsPerCore, "the most pods per CPU, below --max-pods (0: no bound)")
	fs.Int64Var(&c.PodPidsLimit, "pod-max-pids", c.PodPidsLimit, "the most processes in each pod (-1 or 0: no limit)")
	fs.BoolVar(&c.FailSwapOn, "fail-swap-on", c.FailSwapOn, "refuse to start while swap is on")
	fs.BoolVar(&c.FailCgroupV1, "fail-cgroupv1", c.FailCgroupV1, "refuse to start on a cgroup v1 host")
	fs.StringVar(&c.CPUManagerPolicy, "cpu-manager-policy", c.CPUManagerPolicy, "none, or static: Guaranteed pods' containers asking for whole CPUs get CPUs of their own")
	fs.StringToStringVar(&c.CPUManagerPolicyOptions, "cpu-manager-policy-options", nil, "options of the static policy (full-pcpus-only=true)")
	fs.DurationVar(&c.CPUManagerReconcilePeriod, "cpu-manager-reconcile-period", c.CPUManagerReconcilePeriod, "how often every container's cpuset is checked")
	fs.StringVar(&c.ReservedSystemCPUs, "reserved-cpus", "", "CPUs kept for the system and Kubernetes daemons (a cpuset list such as 0-1); replaces the cpu of --system-reserved and --kube-reserved")
	fs.StringVar(&c.TopologyManagerPolicy, "topology-manager-policy", c.TopologyManagerPolicy, "none, or single-numa-node (a machine with one NUMA node only)")
	fs.StringVar(&c.TopologyManagerScope, "topology-manager-scope", c.TopologyManagerScope, "container or pod")
	fs.StringSliceVar(&f.taints, "register-with-taints", nil, "taints of the Node when it registers (key=value:Effect or key:Effect, comma-separated)")
	return f
}

// Config resolves file and flags.
func (f *Flags) Config() (Config, error) {
	cfg := Default()
	if f.configFile != "" {
		b, err := os.ReadFile(f.configFile)
		if err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		if err := ApplyKubeletConfiguration(&cfg, b); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", f.configFile, err)
		}
	}
	// Flags set on the command line win.
	var err error
	f.fs.Visit(func(fl *pflag.Flag) {
		c := &f.cfg
		switch fl.Name {
		case "container-runtime-endpoint":
			cfg.ContainerRuntimeEndpoint = c.ContainerRuntimeEndpoint
		case "runtime-request-timeout":
			cfg.RuntimeRequestTimeout = c.RuntimeRequestTimeout
		case "pod-manifest-path":
			cfg.PodManifestPath = c.PodManifestPath
		case "manifest-url":
			cfg.ManifestURL = c.ManifestURL
		case "kubeconfig":
			cfg.Kubeconfig = c.Kubeconfig
		case "hostname-override":
			cfg.HostnameOverride = c.HostnameOverride
		case "node-ip":
			cfg.NodeIPs, err = parseIPs(f.nodeIP)
		case "root-dir":
			cfg.RootDir = c.RootDir
		case "pod-logs-dir":
			cfg.PodLogsDir = c.PodLogsDir
		case "max-pods":
			cfg.MaxPods = c.MaxPods
		case "pod-cidr":
			cfg.PodCIDR = c.PodCIDR
		case "sync-frequency":
			cfg.SyncFrequency = c.SyncFrequency
		case "cluster-dns":
			cfg.ClusterDNS = c.ClusterDNS
		case "cluster-domain":
			cfg.ClusterDomain = c.ClusterDomain
		case "resolv-conf":
			cfg.ResolvConf = c.ResolvConf
		case "cgroup-root":
			cfg.CgroupRoot = c.CgroupRoot
		case "healthz-port":
			cfg.HealthzPort = c.HealthzPort
		case "healthz-bind-address":
			cfg.HealthzBindAddress = c.HealthzBindAddress
		case "register-node":
			cfg.RegisterNode = c.RegisterNode
		case "serialize-image-pulls":
			cfg.SerializeImagePulls = c.SerializeImagePulls
		case "max-parallel-image-pulls":
			cfg.MaxParallelImagePulls = c.MaxParallelImagePulls
		case "image-gc-high-threshold":
			cfg.ImageGCHighThresholdPercent = c.ImageGCHighThresholdPercent
		case "image-gc-low-threshold":
			cfg.ImageGCLowThresholdPercent = c.ImageGCLowThresholdPercent
		case "minimum-image-ttl-duration":
			cfg.ImageMinimumGCAge = c.ImageMinimumGCAge
		case "pod-infra-container-image":
			cfg.PodInfraContainerImage = c.PodInfraContainerImage
		case "minimum-container-ttl-duration":
			cfg.MinimumContainerTTL = c.MinimumContainerTTL
		case "maximum-dead-containers-per-container":
			cfg.MaxPerPodContainer = c.MaxPerPodContainer
		case "maximum-dead-containers":
			cfg.MaxContainers = c.MaxContainers
		case "allowed-unsafe-sysctls":
			cfg.AllowedUnsafeSysctls = c.AllowedUnsafeSysctls
		case "seccomp-default":
			cfg.SeccompDefault = c.SeccompDefault
		case "node-labels":
			cfg.NodeLabels = c.NodeLabels
		case "eviction-hard":
			cfg.EvictionHard = flagMap(&err, "--eviction-hard", f.evictionHard, "<")
		case "eviction-soft":
			cfg.EvictionSoft = flagMap(&err, "--eviction-soft", f.evictionSoft, "<")
		case "eviction-soft-grace-period":
			cfg.EvictionSoftGracePeriod = flagMap(&err, "--eviction-soft-grace-period", f.evictionSoftGrace, "=")
		case "eviction-minimum-reclaim":
			cfg.EvictionMinimumReclaim = flagMap(&err, "--eviction-minimum-reclaim", f.evictionMinReclaim, "=")
		case "eviction-max-pod-grace-period":
			cfg.EvictionMaxPodGracePeriod = c.EvictionMaxPodGracePeriod
		case "eviction-pressure-transition-period":
			cfg.EvictionPressureTransitionPeriod = c.EvictionPressureTransitionPeriod
		case "kube-api-qps":
			cfg.KubeAPIQPS = c.KubeAPIQPS
		case "kube-api-burst":
			cfg.KubeAPIBurst = c.KubeAPIBurst
		case "kube-api-content-type":
			cfg.ContentType = c.ContentType
		case "container-log-max-size":
			cfg.ContainerLogMaxSize = c.ContainerLogMaxSize
		case "container-log-max-files":
			cfg.ContainerLogMaxFiles = c.ContainerLogMaxFiles
		case "system-reserved":
			cfg.SystemReserved = c.SystemReserved
		case "kube-reserved":
			cfg.KubeReserved = c.KubeReserved
		case "enforce-node-allocatable":
			cfg.EnforceNodeAllocatable = c.EnforceNodeAllocatable
		case "system-reserved-cgroup":
			cfg.SystemReservedCgroup = c.SystemReservedCgroup
		case "kube-reserved-cgroup":
			cfg.KubeReservedCgroup = c.KubeReservedCgroup
		case "pods-per-core":
			cfg.PodsPerCore = c.PodsPerCore
		case "pod-max-pids":
			cfg.PodPidsLimit = c.PodPidsLimit
		case "fail-swap-on":
			cfg.FailSwapOn = c.FailSwapOn
		case "fail-cgroupv1":
			cfg.FailCgroupV1 = c.FailCgroupV1
		case "cpu-manager-policy":
			cfg.CPUManagerPolicy = c.CPUManagerPolicy
		case "cpu-manager-policy-options":
			cfg.CPUManagerPolicyOptions = c.CPUManagerPolicyOptions
		case "cpu-manager-reconcile-period":
			cfg.CPUManagerReconcilePeriod = c.CPUManagerReconcilePeriod
		case "reserved-cpus":
			cfg.ReservedSystemCPUs = c.ReservedSystemCPUs
		case "topology-manager-policy":
			cfg.TopologyManagerPolicy = c.TopologyManagerPolicy
		case "topology-manager-scope":
			cfg.TopologyManagerScope = c.TopologyManagerScope
		case "register-with-taints":
			var perr error
			if cfg.RegisterWithTaints, perr = parseTaints(f.taints); perr != nil {
				err = perr
			}
		}
	})
	if err != nil {
		return Config{}, err
	}
	return cfg, Complete(&cfg)
}

// flagMap parses one eviction flag, keeping the first error in *err.
func flagMap(err *error, flag, s, op string) map[string]string {
	m, perr := eviction.ParseMap(s, op)
	if perr != nil && *err == nil {
		*err = fmt.Errorf("%s: %w", flag, perr)
	}
	return m
}

func parseIPs(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if net.ParseIP(p) == nil {
			return nil, fmt.Errorf("--node-ip: %q is not an IP address", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Complete fills derived fields and checks the result.
func Complete(c *Config) error {
	if c.NodeName == "" {
		c.NodeName = c.HostnameOverride
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w", err)
		}
		c.NodeName = h
	}
	c.NodeName = strings.ToLower(strings.TrimSpace(c.NodeName))
	if len(c.NodeIPs) == 0 {
		if ip := detectNodeIP(); ip != "" {
			c.NodeIPs = []string{ip}
		}
	}
	var errs []error
	if !strings.HasPrefix(c.ContainerRuntimeEndpoint, "unix://") && !strings.HasPrefix(c.ContainerRuntimeEndpoint, "/") {
		errs = append(errs, fmt.Errorf("container runtime endpoint %q: want unix:///path", c.ContainerRuntimeEndpoint))
	}
	if c.PodsPerCore < 0 {
		errs = append(errs, fmt.Errorf("podsPerCore %d: must not be negative", c.PodsPerCore))
	}
	if c.PodCIDR != "" {
		if err := validatePodCIDR(c.PodCIDR); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("max pods %d: must be positive", c.MaxPods))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("root dir is required"))
	}
	if c.SyncFrequency <= 0 {
		errs = append(errs, errors.New("sync frequency must be positive"))
	}
	if c.SerializeImagePulls && c.MaxParallelImagePulls > 1 {
		errs = append(errs, fmt.Errorf("maxParallelImagePulls %d needs serializeImagePulls false", c.MaxParallelImagePulls))
	}
	if c.MaxParallelImagePulls < 0 {
		errs = append(errs, fmt.Errorf("maxParallelImagePulls %d: must not be negative", c.MaxParallelImagePulls))
	}
	if h, l := c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent; h < 0 || h > 100 || l < 0 || l > 100 || l > h {
		errs = append(errs, fmt.Errorf("image GC thresholds high %d%% low %d%%: want 0 ≤ low ≤ high ≤ 100", h, l))
	}
	if _, err := sysctl.New(c.AllowedUnsafeSysctls); err != nil {
		errs = append(errs, fmt.Errorf("allowedUnsafeSysctls: %w", err))
	}
	ts, err := eviction.ParseThresholds(eviction.Settings{Hard: c.EvictionHard, Soft: c.EvictionSoft,
		SoftGracePeriod: c.EvictionSoftGracePeriod, MinimumReclaim: c.EvictionMinimumReclaim})
	if err != nil {
		errs = append(errs, err)
	}
	c.EvictionThresholds = ts
	if c.EvictionMaxPodGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("evictionMaxPodGracePeriod %d: must not be negative", c.EvictionMaxPodGracePeriod))
	}
	if c.EvictionPressureTransitionPeriod < 0 {
		errs = append(errs, fmt.Errorf("evictionPressureTransitionPeriod %s: must not be negative", c.EvictionPressureTransitionPeriod))
	}
	if c.EvictionMonitoringInterval <= 0 {
		c.EvictionMonitoringInterval = eviction.DefaultMonitoringInterval
	}
	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil || q.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("containerLogMaxSize %q: want a positive quantity such as 10Mi", c.ContainerLogMaxSize))
	}
	if c.ContainerLogMaxFiles < 2 {
		errs = append(errs, fmt.Errorf("containerLogMaxFiles %d: must be at least 2", c.ContainerLogMaxFiles))
	}
	if c.ContainerLogMonitorInterval < 3*time.Second {
		errs = append(errs, fmt.Errorf("containerLogMonitorInterval %s: must be at least 3s", c.ContainerLogMonitorInterval))
	}
	errs = append(errs, completeAllocatable(c))
	errs = append(errs, checkNodeLabels(c.NodeLabels), checkTaints(c.RegisterWithTaints), checkHost(c))
	return errors.Join(errs...)
}

// ApplyKubeletConfiguration decodes a KubeletConfiguration strictly and applies the fields the agent
// honours. A field the agent does not honour is accepted only left out or set to what the agent
// does anyway (kubeletConfigFields, docs/kubeletconfig.md); any other value is an error naming it,
// as are fields that are not in the format at all.
func ApplyKubeletConfiguration(c *Config, data []byte) error {
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &kc); err != nil {
		return fmt.Errorf("decode KubeletConfiguration: %w", err)
	}
	if kc.Kind != "KubeletConfiguration" || kc.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
		return fmt.Errorf("kind %q apiVersion %q: want KubeletConfiguration %s", kc.Kind, kc.APIVersion, kubeletv1beta1.SchemeGroupVersion)
	}
	if err := checkFields(&kc); err != nil {
		return err
	}
	set := func(dst *time.Duration, d time.Duration) {
		if d > 0 {
			*dst = d
		}
	}
	if kc.StaticPodPath != "" {
		c.PodManifestPath = kc.StaticPodPath
	}
	if kc.StaticPodURL != "" {
		c.ManifestURL = kc.StaticPodURL
	}
	if kc.StaticPodURLHeader != nil {
		c.ManifestURLHeader = kc.StaticPodURLHeader
	}
	if kc.PodLogsDir != "" {
		c.PodLogsDir = kc.PodLogsDir
	}
	set(&c.SyncFrequency, kc.SyncFrequency.Duration)
	set(&c.FileCheckFrequency, kc.FileCheckFrequency.Duration)
	set(&c.HTTPCheckFrequency, kc.HTTPCheckFrequency.Duration)
	set(&c.NodeStatusUpdateFrequency, kc.NodeStatusUpdateFrequency.Duration)
	// As the kubelet's defaults: a configuration that sets only the update frequency reports at it.
	if kc.NodeStatusReportFrequency.Duration > 0 {
		c.NodeStatusReportFrequency = kc.NodeStatusReportFrequency.Duration
	} else if kc.NodeStatusUpdateFrequency.Duration > 0 {
		c.NodeStatusReportFrequency = kc.NodeStatusUpdateFrequency.Duration
	}
	set(&c.RuntimeRequestTimeout, kc.RuntimeRequestTimeout.Duration)
	if kc.NodeLeaseDurationSeconds > 0 {
		c.NodeLeaseDurationSeconds = kc.NodeLeaseDurationSeconds
	}
	if kc.ContainerRuntimeEndpoint != "" {
		c.ContainerRuntimeEndpoint = kc.ContainerRuntimeEndpoint
	}
	if len(kc.ClusterDNS) > 0 {
		c.ClusterDNS = kc.ClusterDNS
	}
	if kc.ClusterDomain != "" {
		c.ClusterDomain = kc.ClusterDomain
	}
	if kc.ResolverConfig != nil {
		c.ResolvConf = *kc.ResolverConfig
	}
	if kc.MaxPods > 0 {
		c.MaxPods = int(kc.MaxPods)
	}
	if kc.PodCIDR != "" {
		c.PodCIDR = kc.PodCIDR
	}
	if kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS {
		c.CgroupRoot = ""
	} else if kc.CgroupRoot != "" {
		c.CgroupRoot = strings.TrimSuffix(kc.CgroupRoot, "/") + DefaultCgroupRoot
	}
	if kc.HealthzPort != nil {
		c.HealthzPort = int(*kc.HealthzPort)
	}
	if kc.HealthzBindAddress != "" {
		c.HealthzBindAddress = kc.HealthzBindAddress
	}
	if kc.RegisterNode != nil {
		c.RegisterNode = *kc.RegisterNode
	}
	if kc.SerializeImagePulls != nil {
		c.SerializeImagePulls = *kc.SerializeImagePulls
	}
	if kc.MaxParallelImagePulls != nil {
		c.MaxParallelImagePulls = *kc.MaxParallelImagePulls
	}
	if kc.ImageGCHighThresholdPercent != nil {
		c.ImageGCHighThresholdPercent = int(*kc.ImageGCHighThresholdPercent)
	}
	if kc.ImageGCLowThresholdPercent != nil {
		c.ImageGCLowThresholdPercent = int(*kc.ImageGCLowThresholdPercent)
	}
	set(&c.ImageMinimumGCAge, kc.ImageMinimumGCAge.Duration)
	if len(kc.AllowedUnsafeSysctls) > 0 {
		c.AllowedUnsafeSysctls = kc.AllowedUnsafeSysctls
	}
	if kc.SeccompDefault != nil {
		c.SeccompDefault = *kc.SeccompDefault
	}
	if kc.EvictionHard != nil {
		c.EvictionHard = kc.EvictionHard
		if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
			for k, v := range eviction.DefaultEvictionHard() {
				if _, ok := c.EvictionHard[k]; !ok {
					c.EvictionHard[k] = v
				}
			}
		}
	}
	if kc.EvictionSoft != nil {
		c.EvictionSoft = kc.EvictionSoft
	}
	if kc.EvictionSoftGracePeriod != nil {
		c.EvictionSoftGracePeriod = kc.EvictionSoftGracePeriod
	}
	if kc.EvictionMinimumReclaim != nil {
		c.EvictionMinimumReclaim = kc.EvictionMinimumReclaim
	}
	if kc.EvictionMaxPodGracePeriod != 0 {
		c.EvictionMaxPodGracePeriod = kc.EvictionMaxPodGracePeriod
	}
	set(&c.EvictionPressureTransitionPeriod, kc.EvictionPressureTransitionPeriod.Duration)
	if kc.KernelMemcgNotification {
		c.KernelMemcgNotification = true
	}
	if len(kc.RegisterWithTaints) > 0 {
		c.RegisterWithTaints = kc.RegisterWithTaints
	}
	if kc.KubeAPIQPS != nil {
		c.KubeAPIQPS = float32(*kc.KubeAPIQPS)
	}
	if kc.KubeAPIBurst != 0 {
		c.KubeAPIBurst = int(kc.KubeAPIBurst)
	}
	if kc.ContentType != "" {
		c.ContentType = kc.ContentType
	}
	if kc.ContainerLogMaxSize != "" {
		c.ContainerLogMaxSize = kc.ContainerLogMaxSize
	}
	if kc.ContainerLogMaxFiles != nil {
		c.ContainerLogMaxFiles = *kc.ContainerLogMaxFiles
	}
	if kc.ContainerLogMonitorInterval != nil {
		c.ContainerLogMonitorInterval = kc.ContainerLogMonitorInterval.Duration
	}
	if kc.SystemReserved != nil {
		c.SystemReserved = kc.SystemReserved
	}
	if kc.KubeReserved != nil {
		c.KubeReserved = kc.KubeReserved
	}
	if kc.EnforceNodeAllocatable != nil {
		c.EnforceNodeAllocatable = kc.EnforceNodeAllocatable
	}
	if kc.SystemReservedCgroup != "" {
		c.SystemReservedCgroup = kc.SystemReservedCgroup
	}
	if kc.KubeReservedCgroup != "" {
		c.KubeReservedCgroup = kc.KubeReservedCgroup
	}
	if kc.PodsPerCore != 0 {
		c.PodsPerCore = int(kc.PodsPerCore)
	}
	if kc.PodPidsLimit != nil {
		c.PodPidsLimit = *kc.PodPidsLimit
	}
	if kc.FailSwapOn != nil {
		c.FailSwapOn = *kc.FailSwapOn
	}
	if kc.FailCgroupV1 != nil {
		c.FailCgroupV1 = *kc.FailCgroupV1
	}
	if kc.CPUManagerPolicy != "" {
		c.CPUManagerPolicy = kc.CPUManagerPolicy
	}
	if len(kc.CPUManagerPolicyOptions) > 0 {
		c.CPUManagerPolicyOptions = kc.CPUManagerPolicyOptions
	}
	set(&c.CPUManagerReconcilePeriod, kc.CPUManagerReconcilePeriod.Duration)
	if kc.ReservedSystemCPUs != "" {
		c.ReservedSystemCPUs = kc.ReservedSystemCPUs
	}
	if kc.TopologyManagerPolicy != "" {
		c.TopologyManagerPolicy = kc.TopologyManagerPolicy
	}
	if kc.TopologyManagerScope != "" {
		c.TopologyManagerScope = kc.TopologyManagerScope
	}
	if kc.EnableSystemLogHandler != nil {
		c.EnableSystemLogHandler = *kc.EnableSystemLogHandler
	}
	return nil
}

// validatePodCIDR checks podCIDR as the runtime will read it: comma-separated CIDRs, at most one
// of each IP family.
func validatePodCIDR(v string) error {
	var v4, v6 int
	for _, c := range strings.Split(v, ",") {
		ip, _, err := net.ParseCIDR(strings.TrimSpace(c))
		if err != nil {
			return fmt.Errorf("podCIDR %q: %v", v, err)
		}
		if ip.To4() != nil {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("podCIDR %q: at most one CIDR of each IP family", v)
	}
	return nil
}
