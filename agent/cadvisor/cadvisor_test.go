package cadvisor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// fakeRuntime holds one ready pod "web" in "shop" with a container "nginx".
type fakeRuntime struct{ listErr error }

const (
	podUID  = "1234-abcd"
	sandbox = "sandbox0123456789"
	ctrID   = "ctr0123456789abcdef"
)

func (f fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{
		Id: ctrID, PodSandboxId: sandbox, Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"}, CreatedAt: 1699999990 * 1e9,
		Image:  &runtimeapi.ImageSpec{Image: "sha256:feed", UserSpecifiedImage: "nginx:1.27"},
		Labels: map[string]string{kubecontainer.LabelPodName: "web", kubecontainer.LabelPodNamespace: "shop"},
	}}}, f.listErr
}

func (fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: sandbox, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "shop", Uid: podUID}}}}, nil
}

func (fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sandbox},
		Linux: &runtimeapi.LinuxPodSandboxStats{Network: &runtimeapi.NetworkUsage{Interfaces: []*runtimeapi.NetworkInterfaceUsage{{
			Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 1000}, TxBytes: &runtimeapi.UInt64Value{Value: 2000},
			RxErrors: &runtimeapi.UInt64Value{}, TxErrors: &runtimeapi.UInt64Value{}}}}},
	}}}, nil
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// series gathers the registry into "name{label=value,...} value" lines.
func series(t *testing.T, r *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				if lp.GetValue() != "" {
					l = append(l, lp.GetName()+"="+lp.GetValue())
				}
			}
			out[mf.GetName()+"{"+strings.Join(l, ",")+"}"] = value(m)
		}
	}
	return out
}

// sorted puts the labels of a "name{a=b,...}" key in the order Gather gives them.
func sorted(k string) string {
	name, rest, _ := strings.Cut(k, "{")
	l := strings.Split(strings.TrimSuffix(rest, "}"), ",")
	slices.Sort(l)
	return name + "{" + strings.Trim(strings.Join(l, ","), ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestCadvisorSeriesOfAPodOnCgroupV2: a container's cgroup below its pod's gives cAdvisor's
// series with the Kubernetes labels; the pod's own cgroup and the QoS tier give theirs with
// only their path; the pod's network is on its sandbox; the machine's figures are there.
func TestCadvisorSeriesOfAPodOnCgroupV2(t *testing.T) {
	root, proc := t.TempDir(), t.TempDir()
	pod := "kubepods/burstable/pod" + podUID
	ctr := pod + "/" + ctrID
	writeTree(t, root, map[string]string{
		"cgroup.controllers":                "cpu memory pids\n",
		"memory.stat":                       "anon 100\nfile 50\n",
		"cpu.stat":                          "usage_usec 9000000\nuser_usec 6000000\nsystem_usec 3000000\n",
		ctr + "/cpu.stat":                   "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 10\nnr_throttled 3\nthrottled_usec 1500000\n",
		ctr + "/memory.current":             "10485760\n",
		ctr + "/memory.max":                 "67108864\n",
		ctr + "/memory.stat":                "anon 4194304\nfile 6291456\ninactive_file 2097152\nfile_mapped 1024\npgfault 77\npgmajfault 3\n",
		ctr + "/memory.events":              "oom 1\noom_kill 1\n",
		ctr + "/cpu.weight":                 "100\n",
		ctr + "/cpu.max":                    "50000 100000\n",
		ctr + "/pids.current":               "4\n",
		ctr + "/cgroup.procs":               "4242\n",
		ctr + "/io.stat":                    "253:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n7:9 rbytes=1 wbytes=1 rios=1 wios=1\n",
		pod + "/cpu.stat":                   "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\n",
		pod + "/memory.current":             "20971520\n",
		pod + "/memory.stat":                "anon 8388608\nfile 6291456\ninactive_file 2097152\n",
		"kubepods/burstable/cpu.stat":       "usage_usec 3000000\n",
		"kubepods/burstable/memory.current": "20971520\n",
		"kubepods/cpu.stat":                 "usage_usec 3000000\n",
		"kubepods/memory.current":           "20971520\n",
	})
	sys := t.TempDir()
	writeTree(t, sys, map[string]string{"dev/block/253:0/uevent": "MAJOR=253\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n"})
	links := map[string]string{"4242/fd/0": "/dev/null", "4242/fd/1": "socket:[77]", "4242/fd/2": "pipe:[8]",
		"4242/ns/net": "net:[4026532000]", "self/ns/net": "net:[4026531992]"}
	for name, target := range links {
		os.MkdirAll(filepath.Join(proc, filepath.Dir(name)), 0o755)
		if err := os.Symlink(target, filepath.Join(proc, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, proc, map[string]string{
		"4242/net/dev": "Inter-|   Receive                                                |  Transmit\n" +
			" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
			"    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n" +
			"  eth0:    1000      11    0    2    0     0          0         0     2000      22    0    3    0     0       0          0\n",
		"cpuinfo":                   "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\nmodel name\t: x\n",
		"meminfo":                   "MemTotal:       2048 kB\nMemFree: 1 kB\n",
		"sys/kernel/random/boot_id": "boot-1\n",
	})
	now := time.Unix(1700000000, 0)
	c := New(Config{FS: cgroupfs.FS{Mount: root, Version: cgroupfs.Detect(root)}, PodsCgroup: "/kubepods", ProcRoot: proc, SysRoot: sys,
		Runtime: fakeRuntime{}, Now: func() time.Time { return now }})
	got := series(t, NewRegistry(c))
	l := "container=nginx,id=/" + ctr + ",image=nginx:1.27,name=" + ctrID + ",namespace=shop,pod=web"
	for k, want := range map[string]float64{
		"container_cpu_usage_seconds_total{" + l + ",cpu=total}":                             2.5,
		"container_cpu_user_seconds_total{" + l + "}":                                        2,
		"container_cpu_system_seconds_total{" + l + "}":                                      0.5,
		"container_cpu_cfs_periods_total{" + l + "}":                                         10,
		"container_cpu_cfs_throttled_periods_total{" + l + "}":                               3,
		"container_cpu_cfs_throttled_seconds_total{" + l + "}":                               1.5,
		"container_memory_usage_bytes{" + l + "}":                                            10 << 20,
		"container_memory_working_set_bytes{" + l + "}":                                      8 << 20,
		"container_memory_rss{" + l + "}":                                                    4 << 20,
		"container_memory_cache{" + l + "}":                                                  6 << 20,
		"container_memory_mapped_file{" + l + "}":                                            1024,
		"container_memory_failures_total{" + l + ",failure_type=pgfault,scope=container}":    77,
		"container_memory_failures_total{" + l + ",failure_type=pgmajfault,scope=hierarchy}": 3,
		"container_oom_events_total{" + l + "}":                                              1,
		"container_spec_cpu_shares{" + l + "}":                                               2 + (99*262142)/9999,
		"container_spec_cpu_quota{" + l + "}":                                                50000,
		"container_spec_cpu_period{" + l + "}":                                               100000,
		"container_spec_memory_limit_bytes{" + l + "}":                                       64 << 20,
		"container_threads{" + l + "}":                                                       4,
		"container_last_seen{" + l + "}":                                                     float64(now.Unix()),
		"container_fs_reads_bytes_total{" + l + ",device=/dev/vda}":                          4096,
		"container_fs_writes_bytes_total{" + l + ",device=/dev/vda}":                         8192,
		"container_fs_reads_total{" + l + ",device=/dev/vda}":                                1,
		"container_fs_writes_total{" + l + ",device=/dev/vda}":                               2,
		"container_processes{" + l + "}":                                                     1,
		"container_file_descriptors{" + l + "}":                                              3,
		"container_sockets{" + l + "}":                                                       1,
		"container_start_time_seconds{" + l + "}":                                            1699999990,
		"container_processes{id=/" + pod + "}":                                               1,
		"container_network_receive_packets_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}":          11,
		"container_network_receive_packets_dropped_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}":  2,
		"container_network_transmit_packets_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}":         22,
		"container_network_transmit_packets_dropped_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}": 3,
		"container_memory_working_set_bytes{id=/" + pod + "}":                                                                          18 << 20,
		"container_cpu_usage_seconds_total{id=/kubepods/burstable,cpu=total}":                                                          3,
		"container_memory_usage_bytes{id=/kubepods}":                                                                                   20 << 20,
		"container_network_receive_bytes_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}":            1000,
		"container_network_transmit_bytes_total{id=/" + pod + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}":           2000,
		"container_cpu_usage_seconds_total{id=/,cpu=total}":                                                                            9,
		"container_memory_usage_bytes{id=/}":                                                                                           150,
		"machine_cpu_cores{boot_id=boot-1}":                                                                                            2,
		"machine_memory_bytes{boot_id=boot-1}":                                                                                         2048 * 1024,
		"container_scrape_error{}":                                                                                                     0,
	} {
		key := sorted(k)
		// machine_* carry machine_id and system_uuid from this host when it has them.
		if strings.HasPrefix(k, "machine_") {
			for g := range got {
				if strings.HasPrefix(g, strings.TrimSuffix(key, "}")) {
					key = g
				}
			}
		}
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	// A device sysfs does not name (a loop device gone) is left out.
	for k := range got {
		if strings.Contains(k, "device=,") || strings.Contains(k, "device=}") {
			t.Errorf("an unnamed device's series: %s", k)
		}
	}
	// An unread memory.stat leaves its figures out rather than at 0.
	if _, ok := got["container_memory_rss{id=/kubepods}"]; ok {
		t.Error("container_memory_rss reported without a memory.stat")
	}
}

// TestCadvisorRuntimeDown: a runtime that cannot list its containers gives the scrape error and
// the machine's figures, nothing of the pods.
func TestCadvisorRuntimeDown(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"cgroup.controllers": "cpu memory\n", "kubepods/memory.current": "1\n"})
	c := New(Config{FS: cgroupfs.FS{Mount: root, Version: cgroupfs.V2}, PodsCgroup: "/kubepods", Runtime: fakeRuntime{listErr: os.ErrDeadlineExceeded}})
	got := series(t, NewRegistry(c))
	if got["container_scrape_error{}"] != 1 {
		t.Errorf("scrape error %v", got["container_scrape_error{}"])
	}
	for k := range got {
		if strings.Contains(k, "kubepods") {
			t.Errorf("pod series while the runtime is down: %s", k)
		}
	}
}

// TestCadvisorNetworkOnTheSandboxsCgroup: where the runtime gave the sandbox a cgroup of its own
// (containerd's pause container), the pod's network series are on it, as cAdvisor gives them.
func TestCadvisorNetworkOnTheSandboxsCgroup(t *testing.T) {
	root := t.TempDir()
	sb := "kubepods/burstable/pod" + podUID + "/" + sandbox
	writeTree(t, root, map[string]string{
		"cgroup.controllers":      "cpu memory\n",
		sb + "/cpu.stat":          "usage_usec 1\n",
		sb + "/memory.current":    "1\n",
		"kubepods/memory.current": "1\n",
	})
	c := New(Config{FS: cgroupfs.FS{Mount: root, Version: cgroupfs.V2}, PodsCgroup: "/kubepods", Runtime: fakeRuntime{}})
	got := series(t, NewRegistry(c))
	k := sorted("container_network_receive_bytes_total{id=/" + sb + ",name=" + sandbox + ",namespace=shop,pod=web,interface=eth0}")
	if got[k] != 1000 {
		t.Errorf("%s = %v", k, got[k])
	}
}
