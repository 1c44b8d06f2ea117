package oci

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func TestContainerSpecProcessArgs(t *testing.T) {
	img := imagespec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"default"}}
	for _, tc := range []struct {
		name      string
		cmd, args []string
		img       imagespec.ImageConfig
		want      []string
		err       bool
	}{
		{name: "image only", img: img, want: []string{"/entry", "default"}},
		{name: "args replace cmd", args: []string{"a"}, img: img, want: []string{"/entry", "a"}},
		{name: "command replaces entrypoint and drops cmd", cmd: []string{"/bin/x"}, img: img, want: []string{"/bin/x"}},
		{name: "command and args", cmd: []string{"/bin/x"}, args: []string{"y"}, img: img, want: []string{"/bin/x", "y"}},
		{name: "nothing", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := processArgs(&runtimeapi.ContainerConfig{Command: tc.cmd, Args: tc.args}, tc.img)
			if tc.err != (err != nil) || !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestContainerSpecEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/img", "A=1", "B=2"}, []*runtimeapi.KeyValue{{Key: "B", Value: []byte("3")}, {Key: "C", Value: []byte("x=y")}}, "pod")
	want := []string{"PATH=/img", "HOSTNAME=pod", "A=1", "B=3", "C=x=y"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func writeRootfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0::/root:/bin/sh\n# comment\napp:x:1000:1000::/home/app:/bin/sh\nbroken:line\n",
		"etc/group":  "root:x:0:\napp:x:1000:\nwheel:x:10:app,other\nstaff:x:50:other\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestContainerSpecUser(t *testing.T) {
	root := writeRootfs(t)
	i64 := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	for _, tc := range []struct {
		name      string
		sc        *runtimeapi.LinuxContainerSecurityContext
		imageUser string
		want      specs.User
		err       error
	}{
		{name: "default root", want: specs.User{AdditionalGids: []uint32{0}}},
		{name: "image user name", imageUser: "app", want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{10, 1000}}},
		{name: "image uid:gid", imageUser: "1000:50", want: specs.User{UID: 1000, GID: 50, AdditionalGids: []uint32{10, 50}}},
		{name: "image user:group names", imageUser: "app:staff", want: specs.User{UID: 1000, GID: 50, AdditionalGids: []uint32{10, 50}}},
		{name: "unknown uid is fine", imageUser: "4242", want: specs.User{UID: 4242, AdditionalGids: []uint32{0}}},
		{name: "run as user overrides image", imageUser: "app", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(0)}, want: specs.User{AdditionalGids: []uint32{0}}},
		{name: "run as group and supplemental", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(7), SupplementalGroups: []int64{99, 7}},
			want: specs.User{UID: 1000, GID: 7, AdditionalGids: []uint32{7, 10, 99}}},
		{name: "strict policy skips /etc/group", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "app", SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict},
			want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000}}},
		{name: "unknown name", imageUser: "ghost", err: errdefs.ErrFailedPrecondition},
		{name: "unknown group", imageUser: "app:ghosts", err: errdefs.ErrFailedPrecondition},
		{name: "bad supplemental", sc: &runtimeapi.LinuxContainerSecurityContext{SupplementalGroups: []int64{-1}}, err: errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveUser(root, tc.sc, tc.imageUser)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// An image whose /etc/passwd is a symlink to the host's must not have the host's file read.
func TestContainerSpecUserSymlinkStaysInRootfs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "etc/passwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveUser(root, nil, "root"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("resolved root through a symlink to the host: %v", err)
	}
}

func TestContainerSpecCapabilities(t *testing.T) {
	sc := func(add, drop []string) *runtimeapi.LinuxContainerSecurityContext {
		return &runtimeapi.LinuxContainerSecurityContext{Capabilities: &runtimeapi.Capability{AddCapabilities: add, DropCapabilities: drop}}
	}
	c, err := capabilities(sc(nil, nil), false)
	if err != nil || !reflect.DeepEqual(c.Bounding, DefaultCapabilities) {
		t.Fatalf("default: %v %v", c, err)
	}
	c, _ = capabilities(sc([]string{"net_admin"}, []string{"CAP_KILL", "MKNOD"}), false)
	if !contains(c.Bounding, "CAP_NET_ADMIN") || contains(c.Bounding, "CAP_KILL") || contains(c.Bounding, "CAP_MKNOD") {
		t.Fatalf("add/drop: %v", c.Bounding)
	}
	c, _ = capabilities(sc([]string{"NET_BIND_SERVICE"}, []string{"ALL"}), false)
	if !reflect.DeepEqual(c.Bounding, []string{"CAP_NET_BIND_SERVICE"}) || !reflect.DeepEqual(c.Effective, c.Bounding) {
		t.Fatalf("drop all add one: %v", c)
	}
	c, _ = capabilities(sc([]string{"ALL"}, nil), false)
	if !contains(c.Bounding, "CAP_SYS_ADMIN") {
		t.Fatalf("add all: %v", c.Bounding)
	}
	if _, err := capabilities(sc([]string{"CAP_NOPE"}, nil), false); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("unknown cap: %v", err)
	}
}

func TestContainerSpecSeccomp(t *testing.T) {
	denied := func(s *specs.LinuxSeccomp, call string) bool {
		for _, r := range s.Syscalls {
			if r.Action == specs.ActErrno && contains(r.Names, call) {
				return true
			}
		}
		return false
	}
	rd := &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}
	s, err := seccompFor(rd, false)
	if err != nil || s == nil || !denied(s, "mount") || !denied(s, "kexec_load") || denied(s, "read") {
		t.Fatalf("runtime default: %v %v", s, err)
	}
	if !denied(s, "clone3") || !denied(s, "clone") {
		t.Fatal("namespace-making clones should be refused")
	}
	rd.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}
	if s, _ := seccompFor(rd, false); denied(s, "mount") || !denied(s, "kexec_load") || denied(s, "clone") {
		t.Fatal("CAP_SYS_ADMIN should allow mount and clone")
	}
	if s, err := seccompFor(&runtimeapi.LinuxContainerSecurityContext{}, false); s != nil || err != nil {
		t.Fatalf("unset is unconfined: %v %v", s, err)
	}
	if s, _ := seccompFor(rd, true); s != nil {
		t.Fatal("privileged containers are unconfined")
	}
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.json")
	os.WriteFile(prof, []byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`), 0o644)
	lh := func(ref string) *runtimeapi.LinuxContainerSecurityContext {
		return &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}}
	}
	if s, err := seccompFor(lh(prof), false); err != nil || s.DefaultAction != specs.ActErrno {
		t.Fatalf("localhost: %v %v", s, err)
	}
	for _, ref := range []string{"relative.json", "/etc/passwd"} { // not a path, not a profile
		if _, err := seccompFor(lh(ref), false); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("localhost %q: %v", ref, err)
		}
	}
	if _, err := seccompFor(lh(filepath.Join(dir, "missing.json")), false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("missing localhost profile: %v", err)
	}
}

func baseInput(t *testing.T) SpecInput {
	return SpecInput{
		ID: "abc", Rootfs: writeRootfs(t), CgroupsPath: "/pods/abc",
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Command:  []string{"/bin/sh"},
			Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{}},
		},
		Sandbox: &runtimeapi.PodSandboxConfig{Hostname: "pod", Linux: &runtimeapi.LinuxPodSandboxConfig{
			Sysctls: map[string]string{"net.ipv4.ip_forward": "1", "kernel.shm_rmid_forced": "1"},
		}},
	}
}

func TestContainerSpecGenerate(t *testing.T) {
	in := baseInput(t)
	in.NetNSPath, in.IPCNSPath, in.UTSNSPath = "/run/ns/net", "/run/ns/ipc", "/run/ns/uts"
	in.MinOOMScoreAdj = -500
	in.Config.Linux.Resources = &runtimeapi.LinuxContainerResources{OomScoreAdj: -999, MemoryLimitInBytes: 1 << 20, CpuShares: 2}
	in.Config.Linux.SecurityContext.ReadonlyRootfs = true
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	ns := map[specs.LinuxNamespaceType]string{}
	for _, n := range s.Linux.Namespaces {
		ns[n.Type] = n.Path
	}
	if ns[specs.NetworkNamespace] != "/run/ns/net" || ns[specs.IPCNamespace] != "/run/ns/ipc" || ns[specs.UTSNamespace] != "/run/ns/uts" {
		t.Fatalf("namespaces: %v", s.Linux.Namespaces)
	}
	if p, ok := ns[specs.PIDNamespace]; !ok || p != "" {
		t.Fatalf("pid namespace should be new: %v", s.Linux.Namespaces)
	}
	if *s.Process.OOMScoreAdj != -500 {
		t.Fatalf("oom_score_adj %d, want clamped -500", *s.Process.OOMScoreAdj)
	}
	if s.Process.Cwd != "/" {
		t.Fatalf("cwd %q", s.Process.Cwd)
	}
	if !s.Root.Readonly || s.Hostname != "pod" || *s.Linux.Resources.Memory.Limit != 1<<20 || *s.Linux.Resources.CPU.Shares != 2 {
		t.Fatalf("spec: %+v", s)
	}
	if !reflect.DeepEqual(s.Linux.MaskedPaths, DefaultMaskedPaths) || !reflect.DeepEqual(s.Linux.ReadonlyPaths, DefaultReadonlyPaths) {
		t.Fatal("default masked/readonly paths missing")
	}
	if len(s.Linux.Sysctl) != 2 {
		t.Fatalf("sysctls: %v", s.Linux.Sysctl)
	}

	// Host namespaces: none joined, and sysctls of them dropped. A relative image workdir is
	// relative to /.
	host := baseInput(t)
	host.Image.WorkingDir = "app/../srv"
	s, err = Generate(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace || n.Type == specs.IPCNamespace || n.Type == specs.UTSNamespace {
			t.Fatalf("host pod joined %v", n)
		}
	}
	if len(s.Linux.Sysctl) != 0 || s.Hostname != "" || s.Process.Cwd != "/srv" {
		t.Fatalf("host pod: sysctls %v hostname %q", s.Linux.Sysctl, s.Hostname)
	}
}

func TestContainerSpecPrivileged(t *testing.T) {
	in := baseInput(t)
	in.Config.Linux.SecurityContext.Privileged = true
	if _, err := Generate(in); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("privileged container in unprivileged pod: %v", err)
	}
	in.Sandbox.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.MaskedPaths) != 0 || !contains(s.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") || !s.Linux.Resources.Devices[0].Allow {
		t.Fatalf("privileged spec: %+v", s.Linux)
	}
}

// sharedDir is a temp dir made a shared mount point, as propagating volumes need.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v (needs root)", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestContainerSpecMounts(t *testing.T) {
	host := sharedDir(t)
	sbDir := t.TempDir()
	os.WriteFile(filepath.Join(sbDir, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644)
	in := baseInput(t)
	in.SandboxDir = sbDir
	in.ShmPath = "/run/pod/shm"
	in.Image.Volumes = map[string]struct{}{"/data/vol": {}}
	in.Config.Mounts = []*runtimeapi.Mount{
		{ContainerPath: "/a", HostPath: host, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/b", HostPath: filepath.Join(host, "new"), Readonly: true, RecursiveReadOnly: true},
		{ContainerPath: "/c", HostPath: host, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
	}
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	byDst := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		byDst[m.Destination] = m
	}
	if m := byDst["/a"]; !contains(m.Options, "rslave") || !contains(m.Options, "rw") {
		t.Errorf("/a: %v", m)
	}
	if m := byDst["/b"]; !contains(m.Options, "rro") {
		t.Errorf("/b: %v", m)
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err != nil {
		t.Errorf("missing host path not created: %v", err)
	}
	if s.Linux.RootfsPropagation != "rshared" {
		t.Errorf("rootfs propagation %q", s.Linux.RootfsPropagation)
	}
	if m := byDst["/dev/shm"]; m.Source != "/run/pod/shm" {
		t.Errorf("/dev/shm: %v", m)
	}
	if m, ok := byDst["/etc/hosts"]; !ok || m.Source != filepath.Join(sbDir, "hosts") {
		t.Errorf("/etc/hosts: %v", m)
	}
	if _, ok := byDst["/etc/resolv.conf"]; ok {
		t.Error("resolv.conf mounted though the sandbox has none")
	}
	if st, err := os.Stat(filepath.Join(in.Rootfs, "data/vol")); err != nil || !st.IsDir() {
		t.Errorf("image volume dir: %v", err)
	}
	for _, bad := range []*runtimeapi.Mount{
		{ContainerPath: "rel", HostPath: host},
		{ContainerPath: "/x/../y", HostPath: host},
		{ContainerPath: "/x", HostPath: "rel"},
		{ContainerPath: "/x", HostPath: host, RecursiveReadOnly: true},
	} {
		in.Config.Mounts = []*runtimeapi.Mount{bad}
		if _, err := Generate(in); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("mount %v: %v", bad, err)
		}
	}
	// Propagation from a private mount would silently not propagate.
	private := t.TempDir()
	if err := unix.Mount(private, private, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(private, unix.MNT_DETACH)
	if err := unix.Mount("", private, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range []runtimeapi.MountPropagation{runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL} {
		in.Config.Mounts = []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: private, Propagation: p}}
		if _, err := Generate(in); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("propagation %v from a private mount: %v", p, err)
		}
	}
}

func TestExecLimitedBuffer(t *testing.T) {
	b := &LimitedBuffer{Max: 10}
	for _, p := range []string{"hello", " world", "!!!"} {
		if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("write %q: %d %v", p, n, err)
		}
	}
	if string(b.Bytes()) != "hello worl" || !b.Truncated {
		t.Fatalf("%q %v", b.Bytes(), b.Truncated)
	}
	if !strings.HasPrefix(ociVersion, "1.0") {
		t.Fatal("spec version must stay readable by crun 1.8")
	}
}
