package cri_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/nsmgr"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// sandboxInfo is the verbose status' "info" JSON, the test's window on what the runtime made.
type sandboxInfo struct {
	PID          int    `json:"pid"`
	NetNSPath    string `json:"netnsPath"`
	IPCNSPath    string `json:"ipcnsPath"`
	UTSNSPath    string `json:"utsnsPath"`
	PIDNSPath    string `json:"pidnsPath"`
	UserNSPath   string `json:"usernsPath"`
	ShmPath      string `json:"shmPath"`
	CgroupParent string `json:"cgroupParent"`
	SandboxDir   string `json:"sandboxDir"`
}

func podStatus(t *testing.T, e *runtimetest.Env, id string) (*runtimeapi.PodSandboxStatus, sandboxInfo) {
	t.Helper()
	resp, err := e.Runtime.PodSandboxStatus(e.Ctx(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	var info sandboxInfo
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatalf("status info: %v", err)
	}
	return resp.Status, info
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func withNamespaces(cfg *runtimeapi.PodSandboxConfig, net, pid, ipc runtimeapi.NamespaceMode) *runtimeapi.PodSandboxConfig {
	cfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: net, Pid: pid, Ipc: ipc},
	}
	return cfg
}

func cgroupDirs(rel string) []string {
	var out []string
	for _, m := range runtimetest.CgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, rel)); err == nil {
			out = append(out, filepath.Join(m, rel))
		}
	}
	return out
}

// assertGone checks that nothing of a removed sandbox is left.
func assertGone(t *testing.T, e *runtimetest.Env, info sandboxInfo) {
	t.Helper()
	if m := testutil.MountsUnder(e.Config.State, e.Config.Root); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, p := range []string{info.NetNSPath, info.IPCNSPath, info.UTSNSPath, info.PIDNSPath, info.UserNSPath, info.ShmPath, info.SandboxDir} {
		if p == "" {
			continue
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind", p)
		}
	}
	if d := cgroupDirs(info.CgroupParent); info.CgroupParent != "" && len(d) > 0 {
		t.Errorf("cgroups left: %v", d)
	}
	ents, _ := os.ReadDir(filepath.Join(e.Config.Root, "sandboxes"))
	if len(ents) > 0 {
		t.Errorf("sandbox records left: %d", len(ents))
	}
	if info.PID != 0 {
		// A zombie is gone for our purposes: an init orphaned by a killed daemon is reaped by
		// the machine's pid 1, in its own time.
		if b, err := os.ReadFile("/proc/" + itoa(info.PID) + "/stat"); err == nil && !containsZombie(b) {
			t.Errorf("pod init %d still runs", info.PID)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// inNamespaces runs fn inside the given pinned namespaces.
func inNamespaces(t *testing.T, fn func() error, paths ...string) {
	t.Helper()
	if err := nsmgr.Do(paths, fn); err != nil {
		t.Fatal(err)
	}
}

func TestSandboxLifecycle(t *testing.T) {
	e := runtimetest.Start(t)
	cfg := runtimetest.PodConfig("web")
	cfg.Hostname = "web-host"
	cfg.Labels = map[string]string{"app": "web", "tier": "fe"}
	cfg.Annotations = map[string]string{"note": "kept verbatim"}
	cfg.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"test.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}}
	cfg.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "77", "kernel.shmmni": "1234"}
	withNamespaces(cfg, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD)
	id := e.RunPod(cfg, "")

	st, info := podStatus(t, e, id)
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.CreatedAt <= 0 || st.RuntimeHandler != "runc" ||
		st.Metadata.Name != "web" || st.Labels["tier"] != "fe" || st.Annotations["note"] != "kept verbatim" {
		t.Errorf("status = %v", st)
	}
	if o := st.Linux.GetNamespaces().GetOptions(); o.Network != runtimeapi.NamespaceMode_POD || o.Pid != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("namespace options = %v", o)
	}
	for _, p := range []string{info.NetNSPath, info.IPCNSPath, info.UTSNSPath} {
		if !nsmgr.IsPinned(p) {
			t.Errorf("namespace %q is not pinned", p)
		}
	}
	if info.PIDNSPath != "" || info.PID != 0 {
		t.Errorf("pid CONTAINER made a pod pid namespace: %+v", info)
	}

	files := map[string]string{}
	for _, f := range []string{"hostname", "resolv.conf", "hosts"} {
		b, err := os.ReadFile(filepath.Join(info.SandboxDir, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	if files["hostname"] != "web-host\n" {
		t.Errorf("hostname file = %q", files["hostname"])
	}
	if want := "search test.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"; files["resolv.conf"] != want {
		t.Errorf("resolv.conf = %q, want %q", files["resolv.conf"], want)
	}
	if !strings.Contains(files["hosts"], "localhost") {
		t.Errorf("hosts = %q", files["hosts"])
	}

	var hostname, port, shmmni string
	inNamespaces(t, func() error {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		hostname = unix.ByteSliceToString(u.Nodename[:])
		b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
		port = strings.TrimSpace(string(b))
		b, _ = os.ReadFile("/proc/sys/kernel/shmmni")
		shmmni = strings.TrimSpace(string(b))
		return nil
	}, info.NetNSPath, info.UTSNSPath, info.IPCNSPath)
	if hostname != "web-host" || port != "77" || shmmni != "1234" {
		t.Errorf("inside the pod: hostname %q, ip_unprivileged_port_start %q, shmmni %q", hostname, port, shmmni)
	}

	var sfs unix.Statfs_t
	if err := unix.Statfs(info.ShmPath, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC || sfs.Blocks*uint64(sfs.Bsize) != 64<<20 {
		t.Errorf("shm at %q: %+v, %v", info.ShmPath, sfs, err)
	}
	if !strings.HasPrefix(info.CgroupParent, e.Config.CgroupParent+"/") || len(cgroupDirs(info.CgroupParent)) == 0 {
		t.Errorf("cgroup parent %q not made under %q", info.CgroupParent, e.Config.CgroupParent)
	}

	// A second pod, to give the filters something to leave out.
	other := e.RunPod(runtimetest.PodConfig("db"), "crun")
	list := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		resp, err := e.Runtime.ListPodSandbox(e.Ctx(), &runtimeapi.ListPodSandboxRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range resp.Items {
			ids = append(ids, p.Id)
		}
		return ids
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	for _, tc := range []struct {
		name string
		f    *runtimeapi.PodSandboxFilter
		want int
	}{
		{"all", nil, 2},
		{"id", &runtimeapi.PodSandboxFilter{Id: id}, 1},
		{"id prefix", &runtimeapi.PodSandboxFilter{Id: id[:12]}, 1},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "ffffffffffff0"}, 0},
		{"ready", &runtimeapi.PodSandboxFilter{State: ready}, 2},
		{"not ready", &runtimeapi.PodSandboxFilter{State: notReady}, 0},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "fe"}}, 1},
		{"labels not all matching", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "fe", "app": "db"}}, 0},
	} {
		if got := list(tc.f); len(got) != tc.want {
			t.Errorf("list %s: got %d (%v), want %d", tc.name, len(got), got, tc.want)
		}
	}
	stream, err := e.Runtime.StreamPodSandboxes(e.Ctx(), &runtimeapi.StreamPodSandboxesRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "db"}}})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []string
	for {
		msg, err := stream.Recv()
		if err != nil {
			break
		}
		for _, p := range msg.PodSandboxes {
			streamed = append(streamed, p.Id)
		}
	}
	if len(streamed) != 1 || streamed[0] != other {
		t.Errorf("StreamPodSandboxes app=db: %v, want [%s]", streamed, other)
	}
	if st, _ := podStatus(t, e, other); st.RuntimeHandler != "crun" {
		t.Errorf("runtime handler = %q", st.RuntimeHandler)
	}

	for i := 0; i < 2; i++ {
		if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("StopPodSandbox #%d: %v", i, err)
		}
	}
	if st, _ := podStatus(t, e, id); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("after stop, state = %v", st.State)
	}
	if got := list(&runtimeapi.PodSandboxFilter{State: notReady}); len(got) != 1 || got[0] != id {
		t.Errorf("not ready after stop = %v", got)
	}
	if m := testutil.MountsUnder(info.ShmPath); len(m) > 0 {
		t.Errorf("shm still mounted after stop: %v", m)
	}
	for i := 0; i < 2; i++ {
		if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("RemovePodSandbox #%d: %v", i, err)
		}
	}
	_, err = e.Runtime.PodSandboxStatus(e.Ctx(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)
	// critest asks with a UUID that never existed; CRI wants success for both.
	for _, gone := range []string{id, "0b3d9c1e-7c55-4c1e-9f57-3d2c8f5f6a10"} {
		if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: gone}); err != nil {
			t.Errorf("StopPodSandbox %s after remove: %v", gone, err)
		}
		if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: gone}); err != nil {
			t.Errorf("RemovePodSandbox %s after remove: %v", gone, err)
		}
	}
	// Remove without Stop first, as RemovePodSandbox must also do.
	_, otherInfo := podStatus(t, e, other)
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: other}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, info)
	assertGone(t, e, otherInfo)
	if pins, _ := nsmgr.New(filepath.Join(e.Config.State, "ns")); pins != nil {
		if l, _ := pins.List(); len(l) > 0 {
			t.Errorf("pins left: %v", l)
		}
	}
}

func TestSandboxHostNamespaces(t *testing.T) {
	e := runtimetest.Start(t)
	cfg := withNamespaces(runtimetest.PodConfig("host"), runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE)
	id := e.RunPod(cfg, "")
	st, info := podStatus(t, e, id)
	if o := st.Linux.Namespaces.Options; o.Network != runtimeapi.NamespaceMode_NODE || o.Pid != runtimeapi.NamespaceMode_NODE || o.Ipc != runtimeapi.NamespaceMode_NODE {
		t.Errorf("namespace options = %v", o)
	}
	if info.NetNSPath != "" || info.IPCNSPath != "" || info.UTSNSPath != "" || info.PIDNSPath != "" || info.ShmPath != "" || info.PID != 0 {
		t.Errorf("host namespaces but the pod got its own: %+v", info)
	}
	host, _ := os.Hostname()
	if b, _ := os.ReadFile(filepath.Join(info.SandboxDir, "hostname")); string(b) != host+"\n" {
		t.Errorf("hostname file = %q, want the host's %q", b, host)
	}
	// Host network, own IPC: an IPC sysctl is fine, a net one is not.
	cfg = withNamespaces(runtimetest.PodConfig("hostnet"), runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD)
	cfg.Linux.Sysctls = map[string]string{"kernel.msgmax": "9000"}
	id2 := e.RunPod(cfg, "")
	if _, info := podStatus(t, e, id2); info.IPCNSPath == "" || info.NetNSPath != "" || info.ShmPath == "" {
		t.Errorf("host network, pod IPC: %+v", info)
	}
	cfg = withNamespaces(runtimetest.PodConfig("hostnet2"), runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD)
	cfg.Linux.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
	_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	wantCode(t, err, codes.InvalidArgument)
	var infos []sandboxInfo
	for _, id := range []string{id, id2} {
		_, info := podStatus(t, e, id)
		infos = append(infos, info)
		if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, info := range infos {
		assertGone(t, e, info)
	}
}

func TestSandboxRejectsBadInput(t *testing.T) {
	e := runtimetest.Start(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*runtimeapi.PodSandboxConfig)
		handler string
		code    codes.Code
	}{
		{"slash in name", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "../../etc" }, "", codes.InvalidArgument},
		{"dotdot namespace", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Namespace = ".." }, "", codes.InvalidArgument},
		{"no uid", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Uid = "" }, "", codes.InvalidArgument},
		{"sysctl injection", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"kernel.shm_rmid_forced": "1+kernel.core_pattern=x"}
		}, "", codes.InvalidArgument},
		{"sysctl key injection", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"kernel.shm_rmid_forced=1+kernel.core_pattern": "x"}
		}, "", codes.InvalidArgument},
		{"node-wide sysctl", func(c *runtimeapi.PodSandboxConfig) { c.Linux.Sysctls = map[string]string{"kernel.core_pattern": "x"} }, "", codes.InvalidArgument},
		{"unknown namespaced sysctl", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"net.ipv4.no_such_thing": "1"}
		}, "", codes.InvalidArgument},
		{"sysctl value the kernel refuses", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "999999"}
		}, "", codes.InvalidArgument},
		{"unknown handler", func(c *runtimeapi.PodSandboxConfig) {}, "kata", codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runtimetest.PodConfig("bad")
			tc.mutate(cfg)
			_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: tc.handler})
			wantCode(t, err, tc.code)
		})
	}
	// Nothing of the refused pods may remain, nor a node-wide sysctl change.
	assertGone(t, e, sandboxInfo{})
	if b, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); strings.TrimSpace(string(b)) == "x" {
		t.Fatal("core_pattern was changed")
	}

	// The same pod attempt twice: AlreadyExists until the first is removed.
	cfg := runtimetest.PodConfig("dup")
	id := e.RunPod(cfg, "")
	_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	wantCode(t, err, codes.AlreadyExists)
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	e.RunPod(cfg, "")
}

func TestSandboxSharedPIDNamespace(t *testing.T) {
	e := runtimetest.Start(t)
	cfg := withNamespaces(runtimetest.PodConfig("shared"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	id := e.RunPod(cfg, "")
	_, info := podStatus(t, e, id)
	if info.PID <= 0 || !nsmgr.IsPinned(info.PIDNSPath) {
		t.Fatalf("no pod init: %+v", info)
	}
	proc := "/proc/" + itoa(info.PID)
	cmdline, _ := os.ReadFile(proc + "/cmdline")
	if !strings.Contains(string(cmdline), "catatonit\x00-P") {
		t.Errorf("pod init runs %q", cmdline)
	}
	sameNS := func(a, b string) bool {
		var sa, sb unix.Stat_t
		return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Ino == sb.Ino && sa.Dev == sb.Dev
	}
	for pin, own := range map[string]string{info.PIDNSPath: "pid", info.NetNSPath: "net", info.IPCNSPath: "ipc", info.UTSNSPath: "uts"} {
		if !sameNS(pin, proc+"/ns/"+own) {
			t.Errorf("catatonit is not in the pod's %s namespace", own)
		}
	}
	if sameNS("/proc/self/ns/pid", proc+"/ns/pid") {
		t.Error("catatonit shares the host's pid namespace")
	}
	status, _ := os.ReadFile(proc + "/status")
	if !strings.Contains(string(status), "\nNSpid:\t"+itoa(info.PID)+"\t1\n") {
		t.Errorf("catatonit is not pid 1 of its namespace: %s", status)
	}
	// In every hierarchy: in the pod cgroup, or on cgroup v2 in its pod-init child.
	for _, d := range cgroupDirs(info.CgroupParent) {
		procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		initProcs, _ := os.ReadFile(filepath.Join(d, "pod-init", "cgroup.procs"))
		if !strings.Contains(string(procs)+string(initProcs), itoa(info.PID)+"\n") {
			t.Errorf("catatonit is not in the pod cgroup %s", d)
		}
	}
	if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(proc); err == nil {
		t.Errorf("catatonit %d survived StopPodSandbox", info.PID)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, info)
}

func TestSandboxCgroupParentFromConfig(t *testing.T) {
	e := runtimetest.Start(t)
	// One the kubelet made (it stays after the pod), one nobody made (made and removed whole).
	made := e.Config.CgroupParent + "/kubepods/pod-made"
	for _, m := range runtimetest.CgroupMounts() {
		if err := os.MkdirAll(filepath.Join(m, made), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range runtimetest.CgroupMounts() {
			os.Remove(filepath.Join(m, made))
			os.Remove(filepath.Join(m, e.Config.CgroupParent, "kubepods"))
		}
	})
	fresh := e.Config.CgroupParent + "/kp/burstable/pod-fresh"
	var infos []sandboxInfo
	for i, parent := range []string{made, fresh} {
		cfg := runtimetest.PodConfig("cg" + itoa(i))
		cfg.Linux.CgroupParent = parent
		id := e.RunPod(cfg, "")
		_, info := podStatus(t, e, id)
		if info.CgroupParent != parent || len(cgroupDirs(parent)) != len(runtimetest.CgroupMounts()) {
			t.Errorf("cgroup parent %q: got %q in %v", parent, info.CgroupParent, cgroupDirs(parent))
		}
		infos = append(infos, info)
		if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if d := cgroupDirs(made); len(d) != len(runtimetest.CgroupMounts()) {
		t.Errorf("the kubelet's pod cgroup was removed: %v left", d)
	}
	if d := cgroupDirs(e.Config.CgroupParent + "/kp"); len(d) > 0 {
		t.Errorf("cgroups the runtime made are left: %v", d)
	}
	assertGone(t, e, infos[1])
}

func TestSandboxUpdateResources(t *testing.T) {
	e := runtimetest.Start(t)
	id := e.RunPod(runtimetest.PodConfig("resize"), "")
	_, err := e.Runtime.UpdatePodSandboxResources(e.Ctx(), &runtimeapi.UpdatePodSandboxResourcesRequest{
		PodSandboxId: id,
		Resources:    &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 64 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Restart() // the change is persisted
	resp, err := e.Runtime.PodSandboxStatus(e.Ctx(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Config *runtimeapi.PodSandboxConfig `json:"config"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatal(err)
	}
	if r := info.Config.GetLinux().GetResources(); r.GetCpuShares() != 512 || r.GetMemoryLimitInBytes() != 64<<20 {
		t.Errorf("resources after update = %v", r)
	}
	_, err = e.Runtime.UpdatePodSandboxResources(e.Ctx(), &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "ffffffffffff1"})
	wantCode(t, err, codes.NotFound)
}
