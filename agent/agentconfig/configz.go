package agentconfig

import (
	"reflect"
	"strings"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletConfiguration writes the configuration the agent runs with in the kubelet's format, for
// /configz: flags and file merged, defaults filled, as the kubelet shows its own there. A fixed
// field (docs/kubeletconfig.md) holds the value it accepts besides being left out, which says what
// the agent does; one that accepts only being left out stays so. Like the kubelet's, it carries
// no apiVersion or kind: the kubelet converts its internal configuration without setting them.
func (c Config) KubeletConfiguration() kubeletv1beta1.KubeletConfiguration {
	var kc kubeletv1beta1.KubeletConfiguration
	fillFixed(&kc)
	i32 := func(v int32) *int32 { return &v }
	on := func(v bool) *bool { return &v }
	d := func(v metav1.Duration) *metav1.Duration { return &v }

	kc.StaticPodPath, kc.StaticPodURL, kc.StaticPodURLHeader = c.Kubelet.StaticPodPath, c.Kubelet.StaticPodURL, c.Kubelet.StaticPodURLHeader
	kc.FileCheckFrequency, kc.HTTPCheckFrequency = dur(c.Kubelet.FileCheckFrequency.Duration), dur(c.Kubelet.HTTPCheckFrequency.Duration)
	kc.SyncFrequency = dur(c.Kubelet.SyncFrequency.Duration)

	s := &c.Kubelet
	// As agent.New decides: standalone, the HTTPS API is served only when a port was asked for.
	kc.EnableServer = on(s.Port != 0 && (c.PortSet || c.Kubeconfig != ""))
	kc.Address, kc.Port = s.Address, s.Port
	kc.TLSCertFile, kc.TLSPrivateKeyFile, kc.ServerTLSBootstrap = s.TLSCertFile, s.TLSPrivateKeyFile, s.ServerTLSBootstrap
	kc.Authentication, kc.Authorization = s.Authentication, s.Authorization
	kc.HealthzPort, kc.HealthzBindAddress = i32(int32(*c.Kubelet.HealthzPort)), c.Kubelet.HealthzBindAddress
	kc.EnableSystemLogHandler = on(*c.Kubelet.EnableSystemLogHandler)

	kc.RegisterNode, kc.RegisterWithTaints = on(*c.Kubelet.RegisterNode), c.Kubelet.RegisterWithTaints
	kc.NodeStatusUpdateFrequency = dur(c.Kubelet.NodeStatusUpdateFrequency.Duration)
	kc.NodeStatusReportFrequency = dur(c.Kubelet.NodeStatusReportFrequency.Duration)
	kc.NodeLeaseDurationSeconds = c.Kubelet.NodeLeaseDurationSeconds
	kc.KubeAPIQPS, kc.KubeAPIBurst, kc.ContentType = i32(int32(c.KubeAPIQPS)), int32(c.Kubelet.KubeAPIBurst), c.Kubelet.ContentType
	kc.PodCIDR = c.Kubelet.PodCIDR

	kc.ImageMinimumGCAge = dur(c.Kubelet.ImageMinimumGCAge.Duration)
	kc.ImageGCHighThresholdPercent = i32(int32(*c.Kubelet.ImageGCHighThresholdPercent))
	kc.ImageGCLowThresholdPercent = i32(int32(*c.Kubelet.ImageGCLowThresholdPercent))
	kc.SerializeImagePulls = on(*c.Kubelet.SerializeImagePulls)
	if *c.Kubelet.MaxParallelImagePulls > 0 {
		kc.MaxParallelImagePulls = i32(*c.Kubelet.MaxParallelImagePulls)
	}

	kc.ContainerRuntimeEndpoint, kc.RuntimeRequestTimeout = c.Kubelet.ContainerRuntimeEndpoint, dur(c.Kubelet.RuntimeRequestTimeout.Duration)
	kc.ClusterDomain, kc.ClusterDNS = c.Kubelet.ClusterDomain, c.Kubelet.ClusterDNS
	resolv := *c.Kubelet.ResolverConfig
	kc.ResolverConfig = &resolv
	kc.MaxPods, kc.PodsPerCore = int32(c.Kubelet.MaxPods), int32(c.Kubelet.PodsPerCore)
	kc.AllowedUnsafeSysctls = c.Kubelet.AllowedUnsafeSysctls
	kc.SeccompDefault = c.Kubelet.SeccompDefault

	kc.PodLogsDir, kc.ContainerLogMaxSize = c.Kubelet.PodLogsDir, c.Kubelet.ContainerLogMaxSize
	kc.ContainerLogMaxFiles = i32(*c.Kubelet.ContainerLogMaxFiles)
	kc.ContainerLogMonitorInterval = d(dur(c.Kubelet.ContainerLogMonitorInterval.Duration))
	kc.Logging.Format = "text"

	// evictionHard is the merged set: mergeDefaultEvictionSettings has done its work.
	kc.EvictionHard, kc.EvictionSoft = c.Kubelet.EvictionHard, c.Kubelet.EvictionSoft
	kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim = c.Kubelet.EvictionSoftGracePeriod, c.Kubelet.EvictionMinimumReclaim
	kc.EvictionMaxPodGracePeriod = c.Kubelet.EvictionMaxPodGracePeriod
	kc.EvictionPressureTransitionPeriod = dur(c.Kubelet.EvictionPressureTransitionPeriod.Duration)
	kc.KernelMemcgNotification = c.Kubelet.KernelMemcgNotification

	kc.CgroupsPerQOS = on(c.PodsCgroup != "")
	// The file's cgroupRoot is the parent of kubepods; the agent keeps the kubepods cgroup itself
	// (--cgroup-root names it), so a root not ending in kubepods is shown as it is.
	kc.CgroupRoot = strings.TrimSuffix(c.PodsCgroup, DefaultCgroupRoot)
	kc.FailSwapOn, kc.FailCgroupV1 = on(*c.Kubelet.FailSwapOn), on(*c.Kubelet.FailCgroupV1)
	kc.SystemReserved, kc.KubeReserved = c.Kubelet.SystemReserved, c.Kubelet.KubeReserved
	kc.SystemReservedCgroup, kc.KubeReservedCgroup = c.Kubelet.SystemReservedCgroup, c.Kubelet.KubeReservedCgroup
	kc.EnforceNodeAllocatable = c.Kubelet.EnforceNodeAllocatable
	pids := *c.Kubelet.PodPidsLimit
	kc.PodPidsLimit = &pids
	kc.CPUManagerPolicy, kc.CPUManagerPolicyOptions = c.Kubelet.CPUManagerPolicy, c.Kubelet.CPUManagerPolicyOptions
	kc.CPUManagerReconcilePeriod, kc.ReservedSystemCPUs = dur(c.Kubelet.CPUManagerReconcilePeriod.Duration), c.Kubelet.ReservedSystemCPUs
	kc.TopologyManagerPolicy, kc.TopologyManagerScope = c.Kubelet.TopologyManagerPolicy, c.Kubelet.TopologyManagerScope
	return kc
}

// fillFixed sets every fixed field that accepts a value to its first accepted one; it returns the
// fields whose value does not fit their type (a mistake in kubeletConfigFields, which the test catches).
func fillFixed(kc *kubeletv1beta1.KubeletConfiguration) (unfit []string) {
	v := reflect.ValueOf(kc).Elem()
	index := kubeletConfigIndex.Get()
	for name, rule := range kubeletConfigFields.Get() {
		if rule.honoured || rule.accept != nil || len(rule.allowed) == 0 {
			continue
		}
		if !setTo(v.Field(index[name]), reflect.ValueOf(rule.allowed[0])) {
			unfit = append(unfit, name)
		}
	}
	return unfit
}

// setTo sets f (through a pointer, which it allocates) to val, deep-copied so the rules' values
// are never shared.
func setTo(f, val reflect.Value) bool {
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		if !setTo(p.Elem(), val) {
			return false
		}
		f.Set(p)
		return true
	}
	if val.Kind() != f.Kind() || !val.Type().ConvertibleTo(f.Type()) {
		return false
	}
	f.Set(deepCopy(val).Convert(f.Type()))
	return true
}

// deepCopy copies the pointers inside a struct value (crashLoopBackOff's maxContainerRestartPeriod).
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	}
	return v
}
