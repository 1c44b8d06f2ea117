package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

type fakeRuntime struct{ sandboxStatsErr error }

func v(n uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: n} }

var (
	sbReady = &runtimeapi.PodSandbox{Id: "sb1", CreatedAt: 1e18, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}
	ctrStats = []*runtimeapi.ContainerStats{
		{Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"}},
			Cpu:           &runtimeapi.CpuUsage{Timestamp: 1e18, UsageCoreNanoSeconds: v(3e9), UsageNanoCores: v(1000)},
			Memory:        &runtimeapi.MemoryUsage{Timestamp: 1e18, WorkingSetBytes: v(100)},
			WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: v(10), InodesUsed: v(1)}},
		{Attributes: &runtimeapi.ContainerAttributes{Id: "c2", Metadata: &runtimeapi.ContainerMetadata{Name: "sidecar"}},
			Cpu:    &runtimeapi.CpuUsage{Timestamp: 1e18, UsageCoreNanoSeconds: v(1e9), UsageNanoCores: v(500)},
			Memory: &runtimeapi.MemoryUsage{Timestamp: 1e18, WorkingSetBytes: v(50)}},
	}
)

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{sbReady}}, nil
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if f.sandboxStatsErr != nil {
		return nil, f.sandboxStatsErr
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{
		{Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb1"}, Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:        &runtimeapi.CpuUsage{Timestamp: 1e18, UsageCoreNanoSeconds: v(4e9), UsageNanoCores: v(1500)},
			Memory:     &runtimeapi.MemoryUsage{Timestamp: 1e18, WorkingSetBytes: v(150)},
			Containers: ctrStats,
		}},
		{Attributes: &runtimeapi.PodSandboxAttributes{Id: "gone"}},
	}}, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1", PodSandboxId: "sb1", CreatedAt: 1500e9}, {Id: "c2", PodSandboxId: "sb1", CreatedAt: 1600e9}}}, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest, ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: ctrStats}, nil
}

func fakeProc(t *testing.T, busyTicks int) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "net"), 0o755)
	os.MkdirAll(filepath.Join(dir, "sys", "kernel"), 0o755)
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  " + itoa(busyTicks) + " 0 0 5000 100 0 0 0 7 0\ncpu0 1 0 0 0 0 0 0 0 0 0\nbtime 1700000000\n"
	files := map[string]string{
		"stat":               stat,
		"meminfo":            "MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    600 kB\nInactive(file):  300 kB\nAnonPages:       100 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
		"net/dev":            "Inter-|   Receive\n face |bytes\n    lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n  eth0: 100 2 0 0 0 0 0 0 200 3 0 0 0 0 0 0\n",
		"loadavg":            "0.00 0.01 0.05 1/123 4567\n",
		"sys/kernel/pid_max": "4194304\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeCgroups is a cgroup v1 tree whose root memory cgroup uses 800 kB, 300 kB of it inactive
// file cache: a working set of 500 kB.
func fakeCgroups(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "memory"), 0o755)
	for name, body := range map[string]string{
		"memory/memory.usage_in_bytes": "819200\n",
		"memory/memory.stat":           "cache 307200\ntotal_inactive_file 307200\ntotal_rss 102400\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func itoa(n int) string {
	return string(rune('0'+n/100%10)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   *fakeRuntime
	}{
		{"sandbox stats", &fakeRuntime{}},
		{"container stats fallback", &fakeRuntime{sandboxStatsErr: status.Error(codes.Unimplemented, "no")}},
		// containerd 1.6 fails the whole list while any sandbox is not ready.
		{"container stats when sandbox stats fail", &fakeRuntime{sandboxStatsErr: status.Error(codes.Unknown,
			`failed to decode sandbox container metrics for sandbox "x": sandbox container "x" is not in ready state`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logDir := t.TempDir()
			os.MkdirAll(filepath.Join(logDir, "default_web_u1", "nginx"), 0o755)
			os.WriteFile(filepath.Join(logDir, "default_web_u1", "nginx", "0.log"), make([]byte, 90), 0o644)
			root := t.TempDir()
			vol := filepath.Join(root, "pods", "u1", "volumes", "kubernetes.io~empty-dir", "cache")
			os.MkdirAll(vol, 0o755)
			os.WriteFile(filepath.Join(vol, "data"), make([]byte, 1000), 0o644)
			p := New(tc.rt, Options{NodeName: "node1", ProcRoot: fakeProc(t, 100), CgroupMount: fakeCgroups(t), RootDir: root, LogDir: logDir})
			now := time.Unix(2000, 0)
			p.now = func() time.Time { return now }
			s, err := p.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Node.NodeName != "node1" || *s.Node.CPU.UsageCoreNanoSeconds != 1e9 {
				t.Fatalf("node cpu: %+v", s.Node.CPU)
			}
			if s.Node.CPU.UsageNanoCores != nil {
				t.Fatal("a rate from one sample")
			}
			if ws := *s.Node.Memory.WorkingSetBytes; ws != 500*1024 {
				t.Fatalf("node working set %d", ws)
			}
			// MemTotal less the working set, as memory.available counts it (not MemAvailable).
			if m := s.Node.Memory; *m.AvailableBytes != 500*1024 || *m.UsageBytes != 800*1024 || *m.RSSBytes != 100*1024 {
				t.Fatalf("node memory: available %d, usage %d, rss %d", *m.AvailableBytes, *m.UsageBytes, *m.RSSBytes)
			}
			if s.Node.Fs == nil || s.Node.Fs.CapacityBytes == nil || *s.Node.Rlimit.NumOfRunningProcesses != 123 {
				t.Fatalf("node fs/rlimit: %+v %+v", s.Node.Fs, s.Node.Rlimit)
			}
			if len(s.Node.Network.Interfaces) != 1 || *s.Node.Network.RxBytes != 100 {
				t.Fatalf("node net: %+v", s.Node.Network)
			}
			if len(s.Pods) != 1 {
				t.Fatalf("pods: %+v", s.Pods)
			}
			pod := s.Pods[0]
			if pod.PodRef.Name != "web" || len(pod.Containers) != 2 {
				t.Fatalf("pod: %+v", pod)
			}
			if *pod.CPU.UsageCoreNanoSeconds != 4e9 || *pod.Memory.WorkingSetBytes != 150 {
				t.Fatalf("pod cpu/mem: %v %v", *pod.CPU.UsageCoreNanoSeconds, *pod.Memory.WorkingSetBytes)
			}
			for _, c := range pod.Containers {
				// The start time is the container's creation, not the sample's time.
				if start := map[string]int64{"nginx": 1500, "sidecar": 1600}[c.Name]; c.StartTime.Unix() != start {
					t.Fatalf("container %s started %v, want its creation at %d", c.Name, c.StartTime, start)
				}
				want := map[string]uint64{"nginx": 90, "sidecar": 0}[c.Name]
				if c.Logs == nil || *c.Logs.UsedBytes != want {
					t.Fatalf("container %s logs %+v, want %d bytes", c.Name, c.Logs, want)
				}
			}
			if *pod.EphemeralStorage.UsedBytes != 1100 {
				t.Fatalf("ephemeral storage %d, want 10 (rootfs) + 90 (logs) + 1000 (emptyDir)", *pod.EphemeralStorage.UsedBytes)
			}
			if len(pod.VolumeStats) != 1 || pod.VolumeStats[0].Name != "cache" || *pod.VolumeStats[0].UsedBytes != 1000 || pod.VolumeStats[0].CapacityBytes == nil {
				t.Fatalf("volumes: %+v", pod.VolumeStats)
			}

			// A second sample a second later gives the node's CPU rate.
			p.opts.ProcRoot = fakeProc(t, 200)
			now = now.Add(time.Second)
			s, err = p.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if r := s.Node.CPU.UsageNanoCores; r == nil || *r != 1e9 {
				t.Fatalf("node cpu rate: %v", r)
			}
		})
	}
}

func TestSummaryOfThisHost(t *testing.T) {
	s, err := New(&fakeRuntime{}, Options{RootDir: "/"}).Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.CPU == nil || s.Node.Memory == nil || s.Node.Fs == nil {
		t.Fatalf("host figures missing: %+v", s.Node)
	}
}

func TestFillRates(t *testing.T) {
	p := New(&fakeRuntime{}, Options{})
	at := func(sec int64, usage uint64) *statsapi.CPUStats {
		return &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(sec, 0)), UsageCoreNanoSeconds: &usage}
	}
	pods := func(sec int64, usage uint64) []statsapi.PodStats {
		return []statsapi.PodStats{{PodRef: statsapi.PodReference{UID: "u"}, CPU: at(sec, usage),
			Containers: []statsapi.ContainerStats{{Name: "c", CPU: at(sec, usage)}}}}
	}
	first := pods(100, 1e9)
	p.fillRates(first)
	if first[0].CPU.UsageNanoCores != nil {
		t.Fatal("a rate from one sample")
	}
	second := pods(102, 2e9)
	p.fillRates(second)
	if r := second[0].Containers[0].CPU.UsageNanoCores; r == nil || *r != 5e8 {
		t.Fatalf("container rate %v", r)
	}
	restarted := pods(103, 1e8)
	p.fillRates(restarted)
	if restarted[0].CPU.UsageNanoCores != nil {
		t.Fatal("a rate across a restart")
	}
}

// fsAt is a fixture's cgroup filesystem, its version detected as Options.CgroupMount's is.
func fsAt(mount string) cgroupfs.FS {
	return cgroupfs.FS{Mount: mount, Version: cgroupfs.Detect(mount)}
}

func TestCgroupStats(t *testing.T) {
	now := metav1.Now()
	write := func(path, body string) {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := t.TempDir()
	write(filepath.Join(v1, "cpuacct", "kubepods", "cpuacct.usage"), "5000000000\n")
	write(filepath.Join(v1, "memory", "kubepods", "memory.usage_in_bytes"), "1000\n")
	write(filepath.Join(v1, "memory", "kubepods", "memory.stat"), "cache 10\ntotal_inactive_file 300\ntotal_rss 600\n")
	write(filepath.Join(v1, "memory", "kubepods", "memory.limit_in_bytes"), "9223372036854771712\n")
	cpu, mem, ok := cgroupStats(fsAt(v1), samePath("/kubepods"), now)
	if !ok || *cpu.UsageCoreNanoSeconds != 5e9 || *mem.WorkingSetBytes != 700 || *mem.RSSBytes != 600 || mem.AvailableBytes != nil {
		t.Fatalf("v1: %v %+v %+v", ok, cpu, mem)
	}
	// At its limit by usage, a cgroup still has what its page cache would give back.
	write(filepath.Join(v1, "memory", "kubepods", "memory.limit_in_bytes"), "1000\n")
	if _, mem, _ = cgroupStats(fsAt(v1), samePath("/kubepods"), now); mem.AvailableBytes == nil || *mem.AvailableBytes != 300 {
		t.Fatalf("v1 at its limit: %+v", mem)
	}

	v2 := t.TempDir()
	write(filepath.Join(v2, "cgroup.controllers"), "cpu memory\n")
	write(filepath.Join(v2, "kubepods", "cpu.stat"), "usage_usec 2000\nuser_usec 1000\n")
	write(filepath.Join(v2, "kubepods", "memory.current"), "1000\n")
	write(filepath.Join(v2, "kubepods", "memory.stat"), "anon 500\ninactive_file 100\n")
	write(filepath.Join(v2, "kubepods", "memory.max"), "4000\n")
	cpu, mem, ok = cgroupStats(fsAt(v2), samePath("/kubepods"), now)
	// Available is the limit less the working set (4000 - 900), as the kubelet reports it.
	if !ok || *cpu.UsageCoreNanoSeconds != 2e6 || *mem.WorkingSetBytes != 900 || *mem.AvailableBytes != 3100 {
		t.Fatalf("v2: %v %+v %+v", ok, cpu, mem)
	}
	if _, _, ok := cgroupStats(fsAt(v2), samePath("/nosuch"), now); ok {
		t.Fatal("stats of a missing cgroup")
	}
}

func TestSystemContainersOfThisHost(t *testing.T) {
	s, err := New(&fakeRuntime{}, Options{RootDir: "/", PodsCgroup: "/"}).Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range s.Node.SystemContainers {
		names[c.Name] = c.CPU != nil && c.Memory != nil
	}
	if !names[statsapi.SystemContainerPods] || !names[statsapi.SystemContainerKubelet] {
		t.Fatalf("system containers: %+v", s.Node.SystemContainers)
	}
}

// A pod's task count from its pod cgroup, on either hierarchy, when the runtime's stats have none.
func TestPodProcessesFromThePodCgroup(t *testing.T) {
	v1 := t.TempDir()
	os.MkdirAll(filepath.Join(v1, "pids/kubepods/besteffort/podu1"), 0o755)
	os.WriteFile(filepath.Join(v1, "pids/kubepods/besteffort/podu1/pids.current"), []byte("7\n"), 0o644)
	if n, ok := podProcesses(fsAt(v1), "/kubepods", "u1"); !ok || n != 7 {
		t.Errorf("v1: %d %v", n, ok)
	}
	v2 := t.TempDir()
	os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644)
	os.MkdirAll(filepath.Join(v2, "kubepods/podu2"), 0o755)
	os.WriteFile(filepath.Join(v2, "kubepods/podu2/pids.current"), []byte("3\n"), 0o644)
	if n, ok := podProcesses(fsAt(v2), "/kubepods", "u2"); !ok || n != 3 {
		t.Errorf("v2 guaranteed pod: %d %v", n, ok)
	}
	if _, ok := podProcesses(fsAt(v2), "/kubepods", "gone"); ok {
		t.Error("a pod without a cgroup has no count")
	}
	if _, ok := podProcesses(fsAt(v1), "", "u1"); ok {
		t.Error("without the pods' cgroup nothing is read")
	}
}
