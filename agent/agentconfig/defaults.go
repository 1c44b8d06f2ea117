package agentconfig

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/eviction"
	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// setDefaults fills what a file leaves out, as the kubelet's v1beta1 defaults do, with nodelet's
// own values where they differ (failSwapOn false, cgroupRoot naming the kubepods cgroup's parent).
// A duration or count that is zero or negative in the file is left out too, as nodelet has always
// read one. It runs on the file's decode and before the flags, so a file's map (evictionHard)
// replaces the default rather than merging into it.
func setDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	str(&kc.ContainerRuntimeEndpoint, DefaultRuntimeEndpoint)
	durFloor(&kc.RuntimeRequestTimeout, 2*time.Minute)
	durFloor(&kc.FileCheckFrequency, 20*time.Second)
	durFloor(&kc.HTTPCheckFrequency, 20*time.Second)
	str(&kc.PodLogsDir, DefaultPodLogsDir)
	if kc.MaxPods <= 0 {
		kc.MaxPods = DefaultMaxPods
	}
	durFloor(&kc.SyncFrequency, time.Minute)
	if kc.ConfigMapAndSecretChangeDetectionStrategy == "" {
		kc.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.WatchChangeDetectionStrategy
	}
	// A file that sets only the update frequency reports at it, as the kubelet's defaults have it.
	if kc.NodeStatusReportFrequency.Duration <= 0 {
		kc.NodeStatusReportFrequency = dur(5 * time.Minute)
		if kc.NodeStatusUpdateFrequency.Duration > 0 {
			kc.NodeStatusReportFrequency = kc.NodeStatusUpdateFrequency
		}
	}
	durFloor(&kc.NodeStatusUpdateFrequency, 10*time.Second)
	if kc.NodeLeaseDurationSeconds <= 0 {
		kc.NodeLeaseDurationSeconds = 40
	}
	if kc.ResolverConfig == nil {
		kc.ResolverConfig = new(DefaultResolvConf)
	}
	ptrDefault(&kc.HealthzPort, DefaultHealthzPort)
	str(&kc.HealthzBindAddress, "127.0.0.1")
	ptrDefault(&kc.RegisterNode, true)

	ptrDefault(&kc.SerializeImagePulls, true)
	ptrDefault(&kc.MaxParallelImagePulls, 0)
	ptrDefault(&kc.ImageGCHighThresholdPercent, 85)
	ptrDefault(&kc.ImageGCLowThresholdPercent, 80)
	durFloor(&kc.ImageMinimumGCAge, 2*time.Minute)
	ptrDefault(&kc.SeccompDefault, false)

	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard()
	} else if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard() {
			if _, ok := kc.EvictionHard[k]; !ok {
				kc.EvictionHard[k] = v
			}
		}
	}
	durFloor(&kc.EvictionPressureTransitionPeriod, eviction.DefaultPressureTransitionPeriod)

	ptrDefault(&kc.KubeAPIQPS, 50)
	if kc.KubeAPIBurst == 0 {
		kc.KubeAPIBurst = 100
	}
	str(&kc.ContainerLogMaxSize, "10Mi")
	ptrDefault(&kc.ContainerLogMaxFiles, 5)
	if kc.ContainerLogMonitorInterval == nil {
		kc.ContainerLogMonitorInterval = new(dur(10 * time.Second))
	}
	ptrDefault(&kc.PodPidsLimit, 0)
	ptrDefault(&kc.FailSwapOn, false)
	ptrDefault(&kc.FailCgroupV1, false)
	str(&kc.CPUManagerPolicy, "none")
	durFloor(&kc.CPUManagerReconcilePeriod, 10*time.Second)
	str(&kc.TopologyManagerPolicy, "none")
	str(&kc.TopologyManagerScope, "container")
	ptrDefault(&kc.EnableSystemLogHandler, true)

	// An empty list or map asks for nothing, as if left out.
	if len(kc.ClusterDNS) == 0 {
		kc.ClusterDNS = nil
	}
	if len(kc.AllowedUnsafeSysctls) == 0 {
		kc.AllowedUnsafeSysctls = nil
	}
	if len(kc.RegisterWithTaints) == 0 {
		kc.RegisterWithTaints = nil
	}
	if len(kc.CPUManagerPolicyOptions) == 0 {
		kc.CPUManagerPolicyOptions = nil
	}
}

// setServingDefaults fills the HTTPS API's settings a file leaves out with the file format's
// defaults, which are not the kubelet's legacy flag defaults: anonymous requests refused, tokens
// checked by TokenReview, every request authorized by SubjectAccessReview. enableServer false is
// port 0.
func setServingDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	str(&kc.Address, "0.0.0.0")
	if kc.Port == 0 {
		kc.Port = DefaultPort
	}
	if kc.EnableServer != nil && !*kc.EnableServer {
		kc.Port = 0
	}
	a, z := &kc.Authentication, &kc.Authorization
	ptrDefault(&a.Anonymous.Enabled, false)
	ptrDefault(&a.Webhook.Enabled, true)
	durFloor(&a.Webhook.CacheTTL, 0)
	if z.Mode == "" {
		z.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	durFloor(&z.Webhook.CacheAuthorizedTTL, 0)
	durFloor(&z.Webhook.CacheUnauthorizedTTL, 0)
}

// clearServing empties the HTTPS API's settings for a command that serves none.
func clearServing(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.Address, kc.Port, kc.TLSCertFile, kc.TLSPrivateKeyFile, kc.ServerTLSBootstrap = "", 0, "", "", false
	kc.Authentication, kc.Authorization = kubeletv1beta1.KubeletAuthentication{}, kubeletv1beta1.KubeletAuthorization{}
}

// portSet says a file asks for the HTTPS API's port (or for none, with enableServer false):
// standalone, the API goes on TCP only then.
func portSet(kc *kubeletv1beta1.KubeletConfiguration) bool {
	return kc.Port != 0 || (kc.EnableServer != nil && !*kc.EnableServer)
}

// podsCgroup is the kubepods cgroup a file's cgroupRoot and cgroupsPerQOS name; --cgroup-root,
// unlike the kubelet's, names it directly.
func podsCgroup(kc *kubeletv1beta1.KubeletConfiguration) string {
	switch {
	case kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS:
		return ""
	case kc.CgroupRoot != "":
		return strings.TrimSuffix(kc.CgroupRoot, "/") + DefaultCgroupRoot
	}
	return DefaultCgroupRoot
}

// defaultOptions are the flag-only settings' defaults; the cgroup and the client's rate follow kc.
func defaultOptions(kc *kubeletv1beta1.KubeletConfiguration) Options {
	return Options{
		RootDir:                    DefaultRootDir,
		PodInfraContainerImage:     DefaultPodInfraContainerImage,
		MaxPerPodContainer:         1,
		MaxContainers:              -1,
		EvictionMonitoringInterval: eviction.DefaultMonitoringInterval,
		PodsCgroup:                 podsCgroup(kc),
		KubeAPIQPS:                 float32(*kc.KubeAPIQPS),
	}
}

func ptrDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func str(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

// durFloor sets a duration that is not positive to d.
func durFloor(p *metav1.Duration, d time.Duration) {
	if p.Duration <= 0 {
		p.Duration = d
	}
}
