package agentconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent/eviction"
)

func TestEvictionDefaultsAreTheKubeletsHardThresholds(t *testing.T) {
	cfg, err := configOf(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := eviction.FormatMap(cfg.Kubelet.EvictionHard, "<"); got != "imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%" {
		t.Errorf("evictionHard %s", got)
	}
	// The five hard thresholds, and memory.available's copy for the capped pods' cgroup.
	if len(cfg.EvictionThresholds) != 6 || cfg.Kubelet.EvictionPressureTransitionPeriod.Duration != 5*time.Minute || cfg.EvictionMonitoringInterval != 10*time.Second {
		t.Errorf("thresholds %d, transition %s, interval %s", len(cfg.EvictionThresholds), cfg.Kubelet.EvictionPressureTransitionPeriod.Duration, cfg.EvictionMonitoringInterval)
	}
}

func TestEvictionFileFieldsAndFlagsOverridingThem(t *testing.T) {
	file := header + `evictionHard: {memory.available: 200Mi}
evictionSoft: {memory.available: 1Gi, nodefs.available: 15%}
evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}
evictionMinimumReclaim: {memory.available: 50Mi}
evictionMaxPodGracePeriod: 60
evictionPressureTransitionPeriod: 30s
kernelMemcgNotification: true
`
	cfg, err := configOf(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Kubelet.KernelMemcgNotification {
		t.Error("kernelMemcgNotification: true was not applied")
	}
	if len(cfg.EvictionThresholds) != 4 || cfg.Kubelet.EvictionMaxPodGracePeriod != 60 || cfg.Kubelet.EvictionPressureTransitionPeriod.Duration != 30*time.Second {
		t.Fatalf("file: %+v", cfg.EvictionThresholds)
	}
	for _, th := range cfg.EvictionThresholds {
		if th.Signal == eviction.SignalMemoryAvailable && th.GracePeriod == 0 && (th.Quantity.String() != "200Mi" || th.MinReclaimQuantity.String() != "50Mi") {
			t.Errorf("hard memory threshold %+v", th)
		}
	}
	cfg, err = configOf(t, file, "--eviction-hard=pid.available<1000,memory.available<300Mi", "--eviction-soft=",
		"--eviction-soft-grace-period=", "--eviction-max-pod-grace-period=5", "--eviction-pressure-transition-period=1m")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.EvictionThresholds) != 3 || cfg.Kubelet.EvictionMaxPodGracePeriod != 5 || cfg.Kubelet.EvictionPressureTransitionPeriod.Duration != time.Minute {
		t.Errorf("flags: %+v %d %s", cfg.EvictionThresholds, cfg.Kubelet.EvictionMaxPodGracePeriod, cfg.Kubelet.EvictionPressureTransitionPeriod.Duration)
	}
	if cfg.Kubelet.EvictionHard["memory.available"] != "300Mi" {
		t.Errorf("--eviction-hard %v", cfg.Kubelet.EvictionHard)
	}
}

func TestEvictionSettingErrorsNameTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		args []string
		want string
	}{
		"unknown signal in file":  {file: header + "evictionHard: {memory.free: 1Gi}\n", want: "evictionHard"},
		"bad quantity flag":       {args: []string{"--eviction-hard=memory.available<lots"}, want: "evictionHard: memory.available"},
		"malformed flag":          {args: []string{"--eviction-hard=memory.available=1Gi"}, want: "--eviction-hard"},
		"soft without grace":      {args: []string{"--eviction-soft=memory.available<1Gi"}, want: "evictionSoftGracePeriod"},
		"grace without soft":      {args: []string{"--eviction-soft-grace-period=memory.available=1m"}, want: "evictionSoftGracePeriod"},
		"negative max grace":      {args: []string{"--eviction-max-pod-grace-period=-1"}, want: "evictionMaxPodGracePeriod"},
		"bad reclaim":             {args: []string{"--eviction-minimum-reclaim=nodefs.available=x"}, want: "evictionMinimumReclaim"},
		"unsupported kubelet one": {args: []string{"--eviction-hard=containerfs.available<1Gi"}, want: "containerfs.available"},
		"allocatable uncapped": {args: []string{"--eviction-hard=allocatableMemory.available<1Gi", "--enforce-node-allocatable=none"},
			want: "allocatableMemory.available needs enforceNodeAllocatable to include pods"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := configOf(t, tc.file, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestEvictionHardInFileReplacesDefaultsUnlessMerged(t *testing.T) {
	cfg, err := configOf(t, header+"evictionHard: {memory.available: 1Gi}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Kubelet.EvictionHard) != 1 {
		t.Errorf("without mergeDefaultEvictionSettings: %v", cfg.Kubelet.EvictionHard)
	}
	cfg, err = configOf(t, header+"evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Kubelet.EvictionHard) != 5 || cfg.Kubelet.EvictionHard["memory.available"] != "1Gi" || cfg.Kubelet.EvictionHard["nodefs.available"] != "10%" {
		t.Errorf("merged: %v", cfg.Kubelet.EvictionHard)
	}
}

func TestNodeAllocatableSettings(t *testing.T) {
	cfg, err := configOf(t, header+`systemReserved: {cpu: 500m, memory: 1Gi}
kubeReserved: {memory: 256Mi, pid: "1000"}
enforceNodeAllocatable: [pods, system-reserved]
systemReservedCgroup: /system.slice
`)
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem, pid := cfg.SystemReservedList["cpu"], cfg.SystemReservedList["memory"], cfg.KubeReservedList["pid"]
	if cpu.String() != "500m" || mem.String() != "1Gi" || pid.Value() != 1000 || cfg.Kubelet.SystemReservedCgroup != "/system.slice" ||
		strings.Join(cfg.Kubelet.EnforceNodeAllocatable, ",") != "pods,system-reserved" {
		t.Errorf("file: %+v", cfg)
	}
	cfg, err = configOf(t, header+"systemReserved: {cpu: 500m}\n", "--system-reserved=memory=2Gi", "--enforce-node-allocatable=")
	if m := cfg.SystemReservedList["memory"]; err != nil || m.String() != "2Gi" || len(cfg.SystemReservedList) != 1 || len(cfg.Kubelet.EnforceNodeAllocatable) != 0 {
		t.Errorf("flags over the file: %v %v %v", err, cfg.SystemReservedList, cfg.Kubelet.EnforceNodeAllocatable)
	}
	// Left out: the kubelet's [pods], or nothing when pods get no cgroups of their own.
	if cfg, err = configOf(t, ""); err != nil || strings.Join(cfg.Kubelet.EnforceNodeAllocatable, ",") != "pods" {
		t.Errorf("default: %v %v", err, cfg.Kubelet.EnforceNodeAllocatable)
	}
	if cfg, err = configOf(t, header+"cgroupsPerQOS: false\n"); err != nil || len(cfg.Kubelet.EnforceNodeAllocatable) != 0 {
		t.Errorf("no per-QoS cgroups: %v %v", err, cfg.Kubelet.EnforceNodeAllocatable)
	}
	for file, want := range map[string]string{
		"cgroupsPerQOS: false\nenforceNodeAllocatable: [pods]\n":            "cgroupsPerQOS",
		"enforceNodeAllocatable: [kube-reserved]\nkubeReserved: {cpu: 1}\n": "kubeReservedCgroup",
		"systemReserved: {hugepages-2Mi: 1Gi}\n":                            "systemReserved",
		"kubeReserved: {memory: -1}\n":                                      "kubeReserved",
	} {
		if _, err := configOf(t, header+file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want one naming %s", file, err, want)
		}
	}
}

func TestPodPidsLimit(t *testing.T) {
	if cfg, err := configOf(t, header+"podPidsLimit: 1024\n"); err != nil || *cfg.Kubelet.PodPidsLimit != 1024 {
		t.Errorf("file: %v %d", err, *cfg.Kubelet.PodPidsLimit)
	}
	if cfg, err := configOf(t, header+"podPidsLimit: 1024\n", "--pod-max-pids=-1"); err != nil || *cfg.Kubelet.PodPidsLimit != -1 {
		t.Errorf("flag over the file: %v %d", err, *cfg.Kubelet.PodPidsLimit)
	}
	if _, err := configOf(t, header+"podPidsLimit: 1024\ncgroupsPerQOS: false\n"); err == nil || !strings.Contains(err.Error(), "podPidsLimit") {
		t.Errorf("no pod cgroups to limit: %v", err)
	}
}

func TestPodsPerCore(t *testing.T) {
	if cfg, err := configOf(t, header+"podsPerCore: 10\n", "--max-pods=50"); err != nil || cfg.Kubelet.PodsPerCore != 10 || cfg.Kubelet.MaxPods != 50 {
		t.Errorf("file: %v %d", err, cfg.Kubelet.PodsPerCore)
	}
	if _, err := configOf(t, "", "--pods-per-core=-1"); err == nil || !strings.Contains(err.Error(), "podsPerCore") {
		t.Errorf("negative: %v", err)
	}
}

// Local storage isolation is what the agent does; asking to turn it off is refused by name.
func TestLocalStorageCapacityIsolationOnlyTrue(t *testing.T) {
	if _, err := configOf(t, header+"localStorageCapacityIsolation: true\n"); err != nil {
		t.Errorf("true: %v", err)
	}
	if _, err := configOf(t, header+"localStorageCapacityIsolation: false\n"); err == nil || !strings.Contains(err.Error(), "localStorageCapacityIsolation") {
		t.Errorf("false: %v, want a refusal naming the field", err)
	}
}

// reservedSystemCPUs replaces the cpu of both reservations by its size, as the kubelet does, so
// allocatable counts the CPUs it keeps; the CPU manager's fields arrive from file and flags.
func TestCPUManagerSettings(t *testing.T) {
	cfg, err := configOf(t, header+`cpuManagerPolicy: static
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
cpuManagerReconcilePeriod: 5s
reservedSystemCPUs: "0,2"
systemReserved: {cpu: 500m, memory: 1Gi}
kubeReserved: {cpu: 200m}
topologyManagerPolicy: single-numa-node
`)
	if err != nil {
		t.Fatal(err)
	}
	sys, kube := cfg.SystemReservedList["cpu"], cfg.KubeReservedList
	if sys.String() != "2" || len(kube) != 0 || cfg.Kubelet.CPUManagerPolicy != "static" || cfg.Kubelet.CPUManagerReconcilePeriod.Duration != 5*time.Second ||
		cfg.Kubelet.CPUManagerPolicyOptions["full-pcpus-only"] != "true" || cfg.Kubelet.TopologyManagerPolicy != "single-numa-node" {
		t.Errorf("file: system %v kube %v %+v", sys, kube, cfg)
	}
	cfg, err = configOf(t, "", "--cpu-manager-policy=static", "--reserved-cpus=1", "--topology-manager-scope=pod")
	if sys := cfg.SystemReservedList["cpu"]; err != nil || sys.String() != "1" || cfg.Kubelet.TopologyManagerScope != "pod" {
		t.Errorf("flags: %v %v %+v", err, sys, cfg)
	}
	if cfg, err = configOf(t, ""); err != nil || cfg.Kubelet.CPUManagerPolicy != "none" || cfg.Kubelet.TopologyManagerPolicy != "none" {
		t.Errorf("default: %v %q %q", err, cfg.Kubelet.CPUManagerPolicy, cfg.Kubelet.TopologyManagerPolicy)
	}
	if _, err := configOf(t, "", "--cpu-manager-policy=dynamic"); err == nil || !strings.Contains(err.Error(), "cpuManagerPolicy") {
		t.Errorf("an unknown policy: %v", err)
	}
}
