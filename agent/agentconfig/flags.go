package agentconfig

import (
	"errors"

	"github.com/spf13/pflag"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// Flags binds the command line.
type Flags struct {
	fs         *pflag.FlagSet
	configFile string
	// serving: AddServingFlags ran, so the command serves the HTTPS API.
	serving bool
	// sets are the flags' values as the command line gave them, in order, for load to replay.
	sets []flagSet
}

// AddFlags registers the kubelet-named flags on fs.
func AddFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.configFile, "config", "", "a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override it")
	// Bound over the defaults, so the help shows them.
	var kc kubeletv1beta1.KubeletConfiguration
	setDefaults(&kc)
	o := defaultOptions(&kc)
	addRecorded(fs, &f.sets, func(fs *pflag.FlagSet) { bindFlags(fs, &kc, &o) })
	return f
}

// Config resolves file and flags: flags set on the command line win.
func (f *Flags) Config() (Config, error) {
	return load(f.configFile, f.serving, f.sets)
}

// NoServing refuses a --config file that asks for the HTTPS API where the command (cmd) serves
// none, rather than leaving its address, port, TLS and auth settings silently unused. Settings
// equal to the defaults, a port of 0 and enableServer false ask for nothing and pass.
func (f *Flags) NoServing(cmd string) error { return noServing(f.configFile, cmd) }

// bindFlags binds the kubelet-named flags on fs over kc (the file format's fields) and o (the
// settings only flags give). Each flag's default is the field's value, so binding writes nothing:
// that lets load bind them again over a loaded configuration and replay the command line on it.
func bindFlags(fs *pflag.FlagSet, kc *kubeletv1beta1.KubeletConfiguration, o *Options) {
	fs.StringVar(&kc.ContainerRuntimeEndpoint, "container-runtime-endpoint", kc.ContainerRuntimeEndpoint, "the CRI endpoint (unix://path)")
	fs.DurationVar(&kc.RuntimeRequestTimeout.Duration, "runtime-request-timeout", kc.RuntimeRequestTimeout.Duration, "timeout of each CRI request except pulls")
	fs.StringVar(&kc.StaticPodPath, "pod-manifest-path", kc.StaticPodPath, "a folder (or file) of static pod manifests")
	fs.StringVar(&kc.StaticPodURL, "manifest-url", kc.StaticPodURL, "a URL serving a Pod or PodList, polled")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the cluster to join; none runs standalone")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "the node name to use instead of the hostname")
	fs.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "the node's IP address(es), comma-separated (no DNS lookup is ever made for it)")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "the agent's state folder (pods/<uid>/volumes live under it)")
	fs.StringVar(&kc.PodLogsDir, "pod-logs-dir", kc.PodLogsDir, "where containers' logs are written (CRI log layout)")
	fs.Var(int32Flag{&kc.MaxPods}, "max-pods", "the most pods this node runs")
	fs.StringVar(&kc.PodCIDR, "pod-cidr", kc.PodCIDR, "standalone: the pod CIDR(s) handed to the runtime's default network (in a cluster the Node's spec.podCIDRs are)")
	fs.DurationVar(&kc.SyncFrequency.Duration, "sync-frequency", kc.SyncFrequency.Duration, "the periodic resync of every pod")
	fs.StringSliceVar(&kc.ClusterDNS, "cluster-dns", kc.ClusterDNS, "DNS servers for ClusterFirst pods")
	fs.StringVar(&kc.ClusterDomain, "cluster-domain", kc.ClusterDomain, "the cluster's DNS domain")
	optString(fs, &kc.ResolverConfig, "resolv-conf", "the resolver file pods with dnsPolicy Default use")
	fs.StringVar(&o.PodsCgroup, "cgroup-root", o.PodsCgroup, "parent cgroup of the pods' QoS cgroups; empty lets the runtime choose")
	optInt32(fs, &kc.HealthzPort, "int", "healthz-port", "port of /healthz; 0 disables")
	fs.StringVar(&kc.HealthzBindAddress, "healthz-bind-address", kc.HealthzBindAddress, "address of /healthz")
	optBool(fs, &kc.RegisterNode, "register-node", "register the Node with the apiserver")
	optBool(fs, &kc.SerializeImagePulls, "serialize-image-pulls", "pull one image at a time")
	optInt32(fs, &kc.MaxParallelImagePulls, "int32", "max-parallel-image-pulls", "most parallel pulls when not serialized (0: no bound)")
	optInt32(fs, &kc.ImageGCHighThresholdPercent, "int", "image-gc-high-threshold", "image filesystem usage percent that starts image GC (100 disables it)")
	optInt32(fs, &kc.ImageGCLowThresholdPercent, "int", "image-gc-low-threshold", "image filesystem usage percent image GC frees down to")
	fs.DurationVar(&kc.ImageMinimumGCAge.Duration, "minimum-image-ttl-duration", kc.ImageMinimumGCAge.Duration, "an unused image younger than this is not collected")
	fs.StringVar(&o.PodInfraContainerImage, "pod-infra-container-image", o.PodInfraContainerImage, "the runtime's sandbox image, which image GC never removes")
	fs.DurationVar(&o.MinimumContainerTTL, "minimum-container-ttl-duration", o.MinimumContainerTTL, "a dead container younger than this is not collected")
	fs.IntVar(&o.MaxPerPodContainer, "maximum-dead-containers-per-container", o.MaxPerPodContainer, "dead containers kept per container (<0: no limit)")
	fs.IntVar(&o.MaxContainers, "maximum-dead-containers", o.MaxContainers, "dead containers kept in all (<0: no limit)")
	fs.StringSliceVar(&kc.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", kc.AllowedUnsafeSysctls, "unsafe sysctls or patterns ending in * (e.g. 'kernel.msg*,net.core.somaxconn') pods may set")
	optBool(fs, &kc.SeccompDefault, "seccomp-default", "containers without a seccomp profile run the runtime's default profile (RuntimeDefault) instead of Unconfined")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", o.NodeLabels, "labels added to the Node when it registers (key=value,...); kubernetes.io and k8s.io keys only as the kubelet allows them")
	fs.Var(evictionMap{&kc.EvictionHard, "eviction-hard", "<"}, "eviction-hard", "hard eviction thresholds (signal<quantity or percentage, comma-separated); replaces the defaults")
	fs.Var(evictionMap{&kc.EvictionSoft, "eviction-soft", "<"}, "eviction-soft", "soft eviction thresholds (e.g. memory.available<1.5Gi); each needs a grace period")
	fs.Var(evictionMap{&kc.EvictionSoftGracePeriod, "eviction-soft-grace-period", "="}, "eviction-soft-grace-period", "how long each soft threshold must hold before pods are evicted (e.g. memory.available=1m30s)")
	fs.Var(evictionMap{&kc.EvictionMinimumReclaim, "eviction-minimum-reclaim", "="}, "eviction-minimum-reclaim", "how far below a threshold eviction reclaims (e.g. imagefs.available=2Gi)")
	fs.Int32Var(&kc.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", kc.EvictionMaxPodGracePeriod, "longest grace period, in seconds, a pod evicted for a soft threshold gets")
	fs.DurationVar(&kc.EvictionPressureTransitionPeriod.Duration, "eviction-pressure-transition-period", kc.EvictionPressureTransitionPeriod.Duration, "how long a pressure condition stays after its threshold was last met")
	fs.Var(qpsFlag{&kc.KubeAPIQPS, &o.KubeAPIQPS}, "kube-api-qps", "queries per second to the apiserver (negative: no limit)")
	fs.Var(int32Flag{&kc.KubeAPIBurst}, "kube-api-burst", "burst of queries to the apiserver")
	fs.StringVar(&kc.ContentType, "kube-api-content-type", kc.ContentType, "content type of requests to the apiserver (e.g. application/vnd.kubernetes.protobuf)")
	fs.StringVar(&kc.ContainerLogMaxSize, "container-log-max-size", kc.ContainerLogMaxSize, "a container's log is rotated past this size (quantity, e.g. 10Mi)")
	optInt32(fs, &kc.ContainerLogMaxFiles, "int32", "container-log-max-files", "log files kept per container (at least 2)")
	fs.StringToStringVar(&kc.SystemReserved, "system-reserved", kc.SystemReserved, "resources kept for the system's daemons (cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000)")
	fs.StringToStringVar(&kc.KubeReserved, "kube-reserved", kc.KubeReserved, "resources kept for the Kubernetes daemons, as --system-reserved")
	fs.StringSliceVar(&kc.EnforceNodeAllocatable, "enforce-node-allocatable", kc.EnforceNodeAllocatable, "what is capped by cgroups: pods, system-reserved, kube-reserved (or their -compressible forms), or none (default: pods)")
	fs.StringVar(&kc.SystemReservedCgroup, "system-reserved-cgroup", kc.SystemReservedCgroup, "the existing cgroup system-reserved enforcement writes --system-reserved on")
	fs.StringVar(&kc.KubeReservedCgroup, "kube-reserved-cgroup", kc.KubeReservedCgroup, "the existing cgroup kube-reserved enforcement writes --kube-reserved on")
	fs.Var(int32Flag{&kc.PodsPerCore}, "pods-per-core", "the most pods per CPU, below --max-pods (0: no bound)")
	optInt64(fs, &kc.PodPidsLimit, "pod-max-pids", "the most processes in each pod (-1 or 0: no limit)")
	optBool(fs, &kc.FailSwapOn, "fail-swap-on", "refuse to start while swap is on")
	optBool(fs, &kc.FailCgroupV1, "fail-cgroupv1", "refuse to start on a cgroup v1 host")
	fs.StringVar(&kc.CPUManagerPolicy, "cpu-manager-policy", kc.CPUManagerPolicy, "none, or static: Guaranteed pods' containers asking for whole CPUs get CPUs of their own")
	fs.StringToStringVar(&kc.CPUManagerPolicyOptions, "cpu-manager-policy-options", kc.CPUManagerPolicyOptions, "options of the static policy (full-pcpus-only=true)")
	fs.DurationVar(&kc.CPUManagerReconcilePeriod.Duration, "cpu-manager-reconcile-period", kc.CPUManagerReconcilePeriod.Duration, "how often every container's cpuset is checked")
	fs.StringVar(&kc.ReservedSystemCPUs, "reserved-cpus", kc.ReservedSystemCPUs, "CPUs kept for the system and Kubernetes daemons (a cpuset list such as 0-1); replaces the cpu of --system-reserved and --kube-reserved")
	fs.StringVar(&kc.TopologyManagerPolicy, "topology-manager-policy", kc.TopologyManagerPolicy, "none, or single-numa-node (a machine with one NUMA node only)")
	fs.StringVar(&kc.TopologyManagerScope, "topology-manager-scope", kc.TopologyManagerScope, "container or pod")
	fs.Var(&taints{p: &kc.RegisterWithTaints}, "register-with-taints", "taints of the Node when it registers (key=value:Effect or key:Effect, comma-separated)")
}

// bindServingFlags binds the kubelet's flags of the HTTPS API: address, port, TLS, authentication
// and authorization.
func bindServingFlags(fs *pflag.FlagSet, kc *kubeletv1beta1.KubeletConfiguration) {
	a := &kc.Authentication
	fs.StringVar(&kc.Address, "address", kc.Address, "the IP address the agent's HTTPS API listens on")
	fs.Var(int32Flag{&kc.Port}, "port", "the port of the agent's HTTPS API (served with --kubeconfig, or when given); 0 disables it")
	fs.StringVar(&kc.TLSCertFile, "tls-cert-file", kc.TLSCertFile, "the API's serving certificate (PEM); without it a self-signed one is made under --root-dir/pki")
	fs.StringVar(&kc.TLSPrivateKeyFile, "tls-private-key-file", kc.TLSPrivateKeyFile, "the key of --tls-cert-file")
	fs.BoolVar(&kc.ServerTLSBootstrap, "rotate-server-certificates", kc.ServerTLSBootstrap, "request the serving certificate from the cluster by CSR, and renew it (serverTLSBootstrap)")
	fs.StringVar(&a.X509.ClientCAFile, "client-ca-file", a.X509.ClientCAFile, "CA bundle client certificates of the API are checked against")
	optBool(fs, &a.Anonymous.Enabled, "anonymous-auth", "let requests without credentials in as system:anonymous (still authorized)")
	optBool(fs, &a.Webhook.Enabled, "authentication-token-webhook", "check bearer tokens with a TokenReview")
	fs.StringVar((*string)(&kc.Authorization.Mode), "authorization-mode", string(kc.Authorization.Mode), "Webhook (SubjectAccessReview) or AlwaysAllow")
}

// A flagSet is one Set of a recorded flag, as the command line gave it.
type flagSet struct{ name, value string }

// recorder passes each Set to the flag's Value, which checks it as the command line is parsed, and
// keeps it for load to replay over the loaded configuration: that is how flags win over the file
// (the kubelet parses its command line a second time for the same end).
type recorder struct {
	pflag.Value
	name string
	sets *[]flagSet
}

func (r recorder) Set(s string) error {
	if err := r.Value.Set(s); err != nil && !errors.As(err, new(laterError)) {
		return err
	}
	*r.sets = append(*r.sets, flagSet{r.name, s})
	return nil
}

// addRecorded adds to fs the flags bind binds, each recorded into sets.
func addRecorded(fs *pflag.FlagSet, sets *[]flagSet, bind func(*pflag.FlagSet)) {
	tmp := pflag.NewFlagSet("", pflag.ContinueOnError)
	tmp.SortFlags = false
	bind(tmp)
	tmp.VisitAll(func(fl *pflag.Flag) {
		// pflag leaves a zero default out of the help by the Value's type, which the recorder
		// hides from it: say it by an empty default instead.
		if t := fl.Value.Type(); t == "duration" && fl.DefValue == "0s" || t == "stringSlice" && fl.DefValue == "[]" {
			fl.DefValue = ""
		}
		fl.Value = recorder{fl.Value, fl.Name, sets}
		fs.AddFlag(fl)
	})
}

// replay binds the flags again over kc and o and gives them the recorded values, in order.
func replay(sets []flagSet, serving bool, kc *kubeletv1beta1.KubeletConfiguration, o *Options) error {
	tmp := pflag.NewFlagSet("", pflag.ContinueOnError)
	bindFlags(tmp, kc, o)
	if serving {
		bindServingFlags(tmp, kc)
	}
	for _, s := range sets {
		if err := tmp.Lookup(s.name).Value.Set(s.value); err != nil {
			var later laterError
			if errors.As(err, &later) {
				return later.error
			}
			return err
		}
	}
	return nil
}
