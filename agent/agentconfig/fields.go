package agentconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/lazy"
)

// A fieldRule says what the agent does with one KubeletConfiguration field. A field the agent
// honours takes every valid value; any other field is accepted only when left out or set to a value
// that describes what the agent does anyway, and refused at start otherwise, so that no setting a
// user wrote is silently dropped.
type fieldRule struct {
	// does is what the agent does with the field, for the error and docs/kubeletconfig.md.
	does string
	// allowed are the values accepted besides leaving the field out; nil with honoured false accepts
	// only leaving it out.
	allowed []any
	// honoured: every value is applied (and checked where it is applied).
	honoured bool
	// accept, when set, replaces allowed: fields whose acceptable values depend on other fields.
	accept func(kc *kubeletv1beta1.KubeletConfiguration) error
	// acceptedDoc describes the accepted values for people where printing them would not.
	acceptedDoc string
}

func honoured(does string) fieldRule { return fieldRule{does: does, honoured: true} }

// only accepts the field left out or set to one of allowed (pointers compare by what they point to).
func only(does string, allowed ...any) fieldRule { return fieldRule{does: does, allowed: allowed} }

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// kubeletConfigFields classifies every field of KubeletConfiguration by its JSON name (the spelling
// users write). TestEveryKubeletConfigurationFieldIsClassified walks the type by reflection, so a
// field added by a k8s.io/kubelet bump fails the test until someone decides what it means here.
// Built when a config file is first checked, not at init (modes without the agent never need it).
var kubeletConfigFields = lazy.Value[map[string]fieldRule]{New: func() map[string]fieldRule {
	return map[string]fieldRule{
		"apiVersion/kind": honoured("must be kubelet.config.k8s.io/v1beta1 KubeletConfiguration"),

		// Pod sources.
		"staticPodPath":      honoured("the static pod manifest folder or file"),
		"staticPodURL":       honoured("a URL serving a Pod or PodList, polled"),
		"staticPodURLHeader": honoured("headers sent with each poll of staticPodURL"),
		"fileCheckFrequency": honoured("how often the manifest folder is re-read besides its change notifications"),
		"httpCheckFrequency": honoured("how often staticPodURL is polled"),
		"syncFrequency":      honoured("the periodic resync of every pod"),
		"runOnce":            only("nodelet has no run-once mode; pods are kept running", false),

		// The agent's HTTPS API and health endpoint.
		"enableServer":      honoured("false serves no HTTPS API (the root-only unix socket stays)"),
		"address":           honoured("the HTTPS API's address"),
		"port":              honoured("the HTTPS API's port"),
		"tlsCertFile":       honoured("the HTTPS API's certificate"),
		"tlsPrivateKeyFile": honoured("its key"),
		"serverTLSBootstrap": honoured("the serving certificate is requested from the cluster by CSR " +
			"(kubernetes.io/kubelet-serving) and renewed"),
		"authentication": honoured("x509.clientCAFile, webhook.enabled, webhook.cacheTTL, anonymous.enabled: as the kubelet"),
		"authorization":  honoured("mode Webhook or AlwaysAllow, webhook.cacheAuthorizedTTL and cacheUnauthorizedTTL: as the kubelet"),
		"readOnlyPort":   only("the unauthenticated read-only port is never served", int32(0)),
		"tlsCipherSuites": only("the HTTPS API uses Go's default cipher suites for TLS 1.2 and 1.3; " +
			"choosing them is not implemented"),
		"tlsCurvePreferences": only("the HTTPS API uses Go's default curves; choosing them is not implemented"),
		"tlsMinVersion":       only("the HTTPS API accepts TLS 1.2 and later; another minimum is not implemented", "VersionTLS12"),
		"rotateCertificates": only("the client certificate of the kubeconfig is used as it is; client certificate "+
			"rotation is not implemented", false),
		"healthzPort":        honoured("port of /healthz, 0 disables it"),
		"healthzBindAddress": honoured("address of /healthz"),
		"enableDebuggingHandlers": only("the API always serves logs, exec, attach, port-forward and "+
			"containerLogs to authorized callers; turning them off is not implemented", true),
		"enableContentionProfiling": only("no profiling handlers are served", false),
		"enableProfilingHandler":    only("no /debug/pprof handler is served", false),
		"enableDebugFlagsHandler":   only("no /debug/flags/v handler is served", false),
		"enableSystemLogHandler": honoured("/logs/ serves the node's /var/log (listings and regular files, never " +
			"outside it) to authorized callers; false answers 405 there"),
		"enableSystemLogQuery":           only("/logs/?query (journal queries) is not implemented", false),
		"streamingConnectionIdleTimeout": only("exec/attach/port-forward streams are the runtime's; their idle timeout is the runtime's setting"),

		// The cluster.
		"registerNode":              honoured("register the Node with the apiserver"),
		"registerWithTaints":        honoured("the Node's taints at registration"),
		"providerID":                only("spec.providerID is not set on the Node; setting it is not implemented"),
		"nodeStatusUpdateFrequency": honoured("how often the Node's status is computed and posted"),
		"nodeStatusReportFrequency": honoured("a status unchanged but for its heartbeats is posted only this long after the last post " +
			"(default 5m, or nodeStatusUpdateFrequency when only that is set); the Lease shows the node alive meanwhile"),
		"nodeLeaseDurationSeconds": honoured("the Lease's duration; it is renewed every quarter of it"),
		"nodeStatusMaxImages":      only("the Node lists its 50 largest images", int32(50)),
		"kubeAPIQPS":               honoured("the apiserver client's queries per second (client-go's rate limiter)"),
		"kubeAPIBurst":             honoured("the apiserver client's burst"),
		"contentType":              honoured("the apiserver client's content type (e.g. application/vnd.kubernetes.protobuf)"),
		"eventRecordQPS": only("events go through the apiserver client (kubeAPIQPS) with client-go's event " +
			"spam filter; a separate event rate is not implemented"),
		"eventBurst":                   only("see eventRecordQPS"),
		"enableControllerAttachDetach": only("volumes that need attaching are left to the attach/detach controller", true),
		"podCIDR":                      honoured("standalone, handed to the runtime (UpdateRuntimeConfig), whose own default network then uses it; in a cluster the Node's spec.podCIDRs are"),

		// Images.
		"imageMinimumGCAge":           honoured("an unused image younger than this is not collected"),
		"imageGCHighThresholdPercent": honoured("image filesystem usage that starts image GC"),
		"imageGCLowThresholdPercent":  honoured("usage image GC frees down to"),
		"imageMaximumGCAge":           only("unused images are collected for disk space only; collection by age is not implemented", dur(0)),
		"serializeImagePulls":         honoured("pull one image at a time"),
		"maxParallelImagePulls":       honoured("the most parallel pulls when not serialized"),
		"registryPullQPS":             only("pulls are not rate limited", int32(0)),
		"registryBurst":               only("pulls are not rate limited"),
		"imagePullCredentialsVerificationPolicy": only("an image on the node is used by any pod without checking "+
			"its pull credentials (the NeverVerify behaviour)", kubeletv1beta1.NeverVerify),
		"preloadedImagesVerificationAllowlist": only("pull credentials are never verified (see imagePullCredentialsVerificationPolicy)"),

		// Runtime and DNS.
		"containerRuntimeEndpoint": honoured("the CRI endpoint"),
		"imageServiceEndpoint": {
			does:        "images are served by the containerRuntimeEndpoint; a separate image endpoint is not implemented",
			acceptedDoc: "the containerRuntimeEndpoint",
			accept: func(kc *kubeletv1beta1.KubeletConfiguration) error {
				if e := kc.ImageServiceEndpoint; e != "" && e != kc.ContainerRuntimeEndpoint {
					return fmt.Errorf("%q is not containerRuntimeEndpoint %q", e, kc.ContainerRuntimeEndpoint)
				}
				return nil
			},
		},
		"runtimeRequestTimeout": honoured("timeout of each CRI request except pulls"),
		"clusterDomain":         honoured("the cluster's DNS domain for ClusterFirst pods"),
		"clusterDNS":            honoured("the DNS servers of ClusterFirst pods"),
		"resolvConf":            honoured("the resolver file of dnsPolicy Default pods"),
		"hairpinMode":           only("hairpin traffic is the CNI network's setting, not the agent's"),
		"maxPods":               honoured("the most pods the node runs; its pods capacity"),
		"podsPerCore":           honoured("the pods capacity is at most this many per CPU, below maxPods"),
		"allowedUnsafeSysctls":  honoured("unsafe sysctls pods may set"),
		"seccompDefault":        honoured("true runs containers that name no seccomp profile (in the pod or the container) RuntimeDefault instead of Unconfined"),
		"userNamespaces": {does: "pods with hostUsers: false get 65536 host IDs each, above the host's first 65536 or from the " +
			"kubelet user's subordinate IDs, recorded in pods/<uid>/userns; another idsPerPod is not implemented",
			acceptedDoc: "idsPerPod: 65536 (0 or left out means 65536)",
			allowed: []any{kubeletv1beta1.UserNamespaces{}, kubeletv1beta1.UserNamespaces{IDsPerPod: new(int64(0))},
				kubeletv1beta1.UserNamespaces{IDsPerPod: new(int64(65536))}}},

		// Logs.
		"podLogsDir":                  honoured("where containers' logs are written"),
		"containerLogMaxSize":         honoured("a container's log is rotated past this size"),
		"containerLogMaxFiles":        honoured("rotated log files kept per container"),
		"containerLogMonitorInterval": honoured("how often containers' logs are checked for rotation"),
		"containerLogMaxWorkers":      only("containers' logs are rotated one at a time", int32(1)),
		"logging": {
			does: "the agent logs text through log/slog, every record written at once; JSON output, verbosity " +
				"and vmodule are not implemented",
			accept: func(kc *kubeletv1beta1.KubeletConfiguration) error {
				l := kc.Logging
				var bad []string
				if l.Format != "" && l.Format != "text" {
					bad = append(bad, fmt.Sprintf("format %q", l.Format))
				}
				if l.Verbosity != 0 {
					bad = append(bad, fmt.Sprintf("verbosity %d", l.Verbosity))
				}
				if len(l.VModule) > 0 {
					bad = append(bad, "vmodule")
				}
				if l.Options.Text.SplitStream || l.Options.JSON.SplitStream {
					bad = append(bad, "splitStream")
				}
				if len(bad) > 0 {
					return errors.New(strings.Join(bad, ", "))
				}
				return nil
			},
			acceptedDoc: "format text, verbosity 0; flushFrequency and infoBufferSize (nothing is buffered)",
		},
		"featureGates":                only("no Kubernetes feature gates are read; the agent's features are fixed"),
		"showHiddenMetricsForVersion": only("hidden metrics are not served"),
		"tracing":                     only("OpenTelemetry tracing is not implemented"),

		// Volumes.
		"volumeStatsAggPeriod": only("volume usage is measured when asked for (stats, eviction); a cache period is not implemented"),
		"volumePluginDir":      only("FlexVolume plugins are not supported"),
		"configMapAndSecretChangeDetectionStrategy": honoured("how the Secrets and ConfigMaps pods use (volumes, env, image pull " +
			"secrets) are kept: Watch (the default) watches each referenced object, and stops watching immutable ones once read " +
			"and idle ones after five syncFrequency periods (at least a minute) until read again; Cache keeps each for the TTL " +
			"of the Node's node.alpha.kubernetes.io/ttl annotation (else a minute), fetched again when a pod that uses it starts; " +
			"Get reads them at every use. Standalone, they are read from the manifest folder whatever the value"),

		// Eviction.
		"evictionHard":                     honoured("hard eviction thresholds"),
		"evictionSoft":                     honoured("soft eviction thresholds"),
		"evictionSoftGracePeriod":          honoured("how long a soft threshold must hold"),
		"evictionMinimumReclaim":           honoured("how far below a threshold eviction reclaims"),
		"evictionMaxPodGracePeriod":        honoured("longest grace period of a pod evicted for a soft threshold"),
		"evictionPressureTransitionPeriod": honoured("how long a pressure condition stays after its threshold was last met"),
		"mergeDefaultEvictionSettings":     honoured("evictionHard is merged with the defaults"),
		"kernelMemcgNotification": honoured("true also checks memory as soon as it crosses the highest memory.available or " +
			"allocatableMemory.available threshold (cgroup v1 memory thresholds; refused at start on cgroup v2)"),
		"localStorageCapacityIsolation": only("true, the kubelet's default: ephemeral-storage is reported, and pods over an emptyDir "+
			"sizeLimit or their ephemeral-storage limits are evicted; false (no isolation) is not implemented", true),

		// Node resources: cgroups, allocatable, CPU, memory and topology managers.
		"cgroupDriver": {does: "cgroupfs; the systemd driver is not implemented (a runtime whose RuntimeConfig reports systemd " +
			"is refused at start)", allowed: []any{"cgroupfs"}},
		"cgroupRoot": honoured("the pods' cgroups go under <cgroupRoot>/kubepods (--cgroup-root, unlike the kubelet's, names the kubepods cgroup itself)"),
		"cgroupsPerQOS": honoured("true (the default) makes the burstable/besteffort cgroups and each pod's cgroup with its " +
			"limits; false leaves the pods' cgroups to the runtime"),
		"kubeletCgroups": only("the agent stays in the cgroup it was started in; moving it is not implemented"),
		"systemCgroups":  only("system processes are not moved; not implemented"),
		"failCgroupV1":   honoured("true refuses to start on a cgroup v1 host"),
		"failSwapOn": honoured("true refuses to start while swap is on; unlike the kubelet, leaving it out does not " +
			"(nodelet's default is false)"),
		"memorySwap": {does: "NoSwap, as the kubelet sends it in every container's resources (at creation and in-place resize): " +
			"on cgroup v1 a memory+swap limit (memory.memsw.limit_in_bytes) equal to the memory limit, so a container with a " +
			"memory limit swaps nothing; on cgroup v2 memory.swap.max 0 for every container. Not bounded, as with the kubelet: " +
			"on cgroup v1 a container without a memory limit (v1 cannot bound swap alone), and every container where the kernel " +
			"does not account swap in memory cgroups (no memory.memsw.limit_in_bytes or memory.swap.max); failSwapOn: true keeps such " +
			"containers off swap by refusing a host with swap on. LimitedSwap (swap in proportion to a Burstable container's memory request, on cgroup v2 only) " +
			"is not implemented: it also needs the node's swap capacity in its status, swap-aware eviction, refusing in-place " +
			"memory resizes of swapping containers and noswap memory-backed volumes",
			acceptedDoc: "swapBehavior: NoSwap",
			allowed:     []any{kubeletv1beta1.MemorySwapConfiguration{SwapBehavior: "NoSwap"}}},
		"systemReserved": honoured("cpu, memory, ephemeral-storage and pid kept from pods: subtracted from allocatable, " +
			"and from the pods cgroup's limits when pods is enforced"),
		"kubeReserved":         honoured("as systemReserved, for the Kubernetes daemons"),
		"systemReservedCgroup": honoured("the existing cgroup system-reserved enforcement writes systemReserved on"),
		"kubeReservedCgroup":   honoured("the existing cgroup kube-reserved enforcement writes kubeReserved on"),
		"enforceNodeAllocatable": honoured("pods caps the pods cgroup (cpu shares, memory, pids, huge pages) at capacity less the " +
			"reservations; system-reserved and kube-reserved (or their -compressible, cpu-only forms) write the reservations on " +
			"their cgroups; left out: [pods]"),
		"podPidsLimit":           honoured("each pod's cgroup gets this pids limit when it is positive"),
		"cpuCFSQuota":            only("containers with a cpu limit, and pods whose containers all have one, get a CFS quota", true),
		"cpuCFSQuotaPeriod":      only("the CFS period of containers and pods is 100ms", dur(100*time.Millisecond)),
		"qosReserved":            only("memory is not reserved for higher QoS classes"),
		"memoryThrottlingFactor": only("memory.high throttling (MemoryQoS) is not implemented"),
		"singleProcessOOMKill": only("the kernel's OOM killer picks the process (no memory.oom.group); " +
			"explicitly asking for either is refused"),
		"protectKernelDefaults":  only("the kernel's sysctls are not checked against the kubelet's expectations", false),
		"makeIPTablesUtilChains": only("no iptables chains are made", false),
		"iptablesMasqueradeBit":  only("no iptables chains are made"),
		"iptablesDropBit":        only("no iptables chains are made"),
		"oomScoreAdj":            only("the agent's own OOM score is left as started (a negative one needs CAP_SYS_RESOURCE)"),
		"maxOpenFiles":           only("the agent's open-file limit is left as started"),
		"cpuManagerPolicy": honoured("none, or static: the containers of Guaranteed pods asking for whole CPUs get CPUs of their own, " +
			"checkpointed in cpu_manager_state under the root dir"),
		"cpuManagerPolicyOptions":   honoured("full-pcpus-only (static): exclusive CPUs as whole physical cores; other options are refused"),
		"cpuManagerReconcilePeriod": honoured("how often every running container's cpuset is checked and corrected"),
		"reservedSystemCPUs":        honoured("CPUs never given exclusively; its size replaces the cpu of systemReserved and kubeReserved"),
		"memoryManagerPolicy": only("there is no memory manager (the behaviour of None); Static, which pins Guaranteed pods' memory "+
			"to NUMA nodes, is not implemented", kubeletv1beta1.NoneMemoryManagerPolicy),
		"reservedMemory":          only("there is no memory manager"),
		"memoryReservationPolicy": only("there is no memory manager", kubeletv1beta1.NoneMemoryReservationPolicy),
		"topologyManagerPolicy": honoured("none, or single-numa-node, accepted only on a machine with one NUMA node, where every " +
			"allocation is on that node; best-effort and restricted are refused"),
		"topologyManagerScope":         honoured("container or pod; on one NUMA node both place every container on it"),
		"topologyManagerPolicyOptions": only("there is no topology manager"),

		// Node shutdown and restarts.
		"shutdownGracePeriod":              only("graceful node shutdown is not implemented", dur(0)),
		"shutdownGracePeriodCriticalPods":  only("graceful node shutdown is not implemented", dur(0)),
		"shutdownGracePeriodByPodPriority": only("graceful node shutdown is not implemented"),
		"crashLoopBackOff": {does: "a crashing container's back-off doubles from 10s to the kubelet's 300s",
			acceptedDoc: "maxContainerRestartPeriod: 5m0s",
			allowed:     []any{kubeletv1beta1.CrashLoopBackOffConfig{MaxContainerRestartPeriod: &metav1.Duration{Duration: 300 * time.Second}}}},
	}
}}

// kubeletConfigIndex maps a JSON name to the field's index in KubeletConfiguration.
var kubeletConfigIndex = lazy.Value[map[string]int]{New: func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	for i := range t.NumField() {
		m[jsonName(t.Field(i))] = i
	}
	return m
}}

// jsonName is the name a field is written with; the inlined TypeMeta is "apiVersion/kind".
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return "apiVersion/kind"
	}
	return name
}

// checkFields refuses every field set to a value the agent would not honour, naming each.
func checkFields(kc *kubeletv1beta1.KubeletConfiguration) error {
	v := reflect.ValueOf(kc).Elem()
	index, rules := kubeletConfigIndex.Get(), kubeletConfigFields.Get()
	names := make([]string, 0, len(index))
	for name := range index {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		rule, ok := rules[name]
		fv := v.Field(index[name])
		switch {
		case !ok:
			// A field of a newer k8s.io/kubelet nobody classified: refuse it rather than ignore it.
			if !fv.IsZero() {
				errs = append(errs, fmt.Errorf("%s: not supported by nodelet", name))
			}
		case rule.honoured:
		case rule.accept != nil:
			if err := rule.accept(kc); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v: not supported: %s", name, err, rule.does))
			}
		case !acceptable(fv, rule.allowed):
			errs = append(errs, fmt.Errorf("%s: %s: not supported: %s%s", name, show(fv), rule.does, acceptedList(rule)))
		}
	}
	return errors.Join(errs...)
}

// acceptable: the field is left out, or (through any pointer) equal to an allowed value. An empty
// list or map asks for nothing, as the kubelet reads it (enforceNodeAllocatable: [] is none).
func acceptable(fv reflect.Value, allowed []any) bool {
	if fv.IsZero() || ((fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0) {
		return true
	}
	for fv.Kind() == reflect.Pointer {
		fv = fv.Elem()
	}
	for _, a := range allowed {
		if reflect.DeepEqual(fv.Interface(), a) {
			return true
		}
	}
	return false
}

// show prints a refused value for its error. A struct is printed as the file spells it (JSON under
// the file's field names): Go's %+v would print the address of each optional field, not its value.
func show(fv reflect.Value) string {
	for fv.Kind() == reflect.Pointer && !fv.IsNil() {
		fv = fv.Elem()
	}
	if d, ok := fv.Interface().(metav1.Duration); ok {
		return d.Duration.String()
	}
	switch fv.Kind() {
	case reflect.String:
		return fmt.Sprintf("%q", fv.String())
	case reflect.Struct:
		if b, err := json.Marshal(fv.Interface()); err == nil {
			return string(b)
		}
		return fmt.Sprintf("%+v", fv.Interface())
	}
	return fmt.Sprintf("%v", fv.Interface())
}

func acceptedList(r fieldRule) string {
	if len(r.allowed) == 0 {
		return " (leave it out)"
	}
	return " (accepted: " + r.acceptedValues() + ", or leave it out)"
}

// acceptedValues lists the values besides leaving the field out, as a user writes them.
func (r fieldRule) acceptedValues() string {
	if r.honoured {
		return "any valid value"
	}
	if r.acceptedDoc != "" {
		return r.acceptedDoc
	}
	var s []string
	for _, a := range r.allowed {
		s = append(s, show(reflect.ValueOf(a)))
	}
	return strings.Join(s, ", ")
}
