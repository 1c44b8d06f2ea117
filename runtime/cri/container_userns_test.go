package cri_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func owner(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// TestUsernsMountsIdmapped: in a pod with its own user namespace (ids 0-65535 on 300000-365535),
// mounts carrying the pod's mappings (as the kubelet sends every mount of such a pod) are bound
// idmapped, from host dirs under a private parent: a root-owned 0755 dir (a hostPath) and a 0777
// one (an emptyDir) are written by the container's root, whose files land as host uid 0, as
// containerd 2 and CRI-O give them; a file the container's uid 1000 writes lands as host uid 1000;
// a file mount and a read-only mount are honoured; and no clone stays attached once the container
// exists. A mount without mappings stays a plain bind, where the root's files land as 300000.
func TestUsernsMountsIdmapped(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			makeSearchable(t, e.Dir)
			private := t.TempDir() // 0700: a mapped root could not even reach these by path
			hostPath, emptyDir, plain := filepath.Join(private, "host"), filepath.Join(private, "empty"), filepath.Join(private, "plain")
			for _, d := range []string{hostPath, emptyDir, plain} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.Chmod(emptyDir, 0o777)
			os.Chmod(plain, 0o777)
			if err := os.WriteFile(filepath.Join(hostPath, "by-host-root"), []byte("r"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(hostPath, "by-1000"), []byte("u"), 0o644)
			os.Chown(filepath.Join(hostPath, "by-1000"), 1000, 1000)
			single := filepath.Join(private, "single")
			os.WriteFile(single, []byte("one file\n"), 0o644)
			// A secret's tmpfs: nosuid, nodev and noexec, which a mount namespace of the pod's user
			// namespace cannot clear, so its read-only remount must keep them.
			secret := filepath.Join(private, "secret")
			os.Mkdir(secret, 0o755)
			if err := unix.Mount("tmpfs", secret, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(secret, unix.MNT_DETACH) })
			os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o644)

			pod := usernsPod(e, "idmapped", 300000)
			sb := e.RunPod(pod, handler)
			u := pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions
			mapped := func(m *runtimeapi.Mount) *runtimeapi.Mount {
				m.UidMappings, m.GidMappings = u.Uids, u.Gids
				return m
			}
			cfg := runtimetest.ContainerConfig("vols", "sleep", "1000")
			cfg.Mounts = []*runtimeapi.Mount{
				mapped(&runtimeapi.Mount{ContainerPath: "/host", HostPath: hostPath}),
				mapped(&runtimeapi.Mount{ContainerPath: "/empty", HostPath: emptyDir}),
				mapped(&runtimeapi.Mount{ContainerPath: "/ro", HostPath: hostPath, Readonly: true}),
				mapped(&runtimeapi.Mount{ContainerPath: "/etc/single", HostPath: single}),
				mapped(&runtimeapi.Mount{ContainerPath: "/secret", HostPath: secret, Readonly: true}),
				{ContainerPath: "/secret-plain", HostPath: secret, Readonly: true},
				{ContainerPath: "/plain", HostPath: plain},
			}
			c := e.RunContainer(sb, pod, cfg)
			exec := func(cmd ...string) (string, int32) {
				t.Helper()
				resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: cmd, Timeout: 60})
				if err != nil {
					t.Fatalf("exec %v: %v", cmd, err)
				}
				return strings.TrimSpace(string(resp.Stdout) + string(resp.Stderr)), resp.ExitCode
			}
			must := func(cmd ...string) string {
				t.Helper()
				out, code := exec(cmd...)
				if code != 0 {
					t.Fatalf("exec %v: exit %d: %s", cmd, code, out)
				}
				return out
			}
			if got := strings.Join(strings.Fields(must("cat", "/proc/self/uid_map")), " "); got != "0 300000 65536" {
				t.Fatalf("uid_map %q", got)
			}
			// The volume's files look as they would to a pod of the host's ids.
			if got := must("stat", "-c", "%u:%g", "/host", "/host/by-host-root", "/host/by-1000", "/etc/single"); got != "0:0\n0:0\n1000:1000\n0:0" {
				t.Errorf("owners in the container:\n%s", got)
			}
			if got := must("cat", "/etc/single"); got != "one file" {
				t.Errorf("file mount reads %q", got)
			}
			must("sh", "-c", "echo root > /host/by-pod-root && echo root > /empty/by-pod-root && mkdir /host/dir && echo x >> /host/by-host-root")
			// The pod's uid 1000 (host 301000) writes as host uid 1000 through the idmapped mount.
			user := runtimetest.ContainerConfig("user", "sh", "-c", "echo user > /empty/by-pod-1000")
			user.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
			user.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 1000}
			user.Mounts = []*runtimeapi.Mount{mapped(&runtimeapi.Mount{ContainerPath: "/empty", HostPath: emptyDir})}
			uc := e.RunContainer(sb, pod, user)
			if st := e.WaitContainerState(uc, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 0 {
				t.Fatalf("uid 1000 could not write the emptyDir: exit %d", st.ExitCode)
			}
			for p, want := range map[string]string{
				filepath.Join(hostPath, "by-pod-root"): "0:0", filepath.Join(hostPath, "dir"): "0:0",
				filepath.Join(emptyDir, "by-pod-root"): "0:0", filepath.Join(emptyDir, "by-pod-1000"): "1000:1000",
			} {
				if got := owner(t, p); got != want {
					t.Errorf("%s on the host is owned by %s, want %s", p, got, want)
				}
			}
			for _, p := range []string{"/ro/nope", "/secret/nope", "/secret-plain/nope"} {
				if _, code := exec("touch", p); code == 0 {
					t.Errorf("a read-only mount took a write to %s", p)
				}
			}
			if got := must("cat", "/secret/key", "/secret-plain/key"); got != "s3crets3cret" {
				t.Errorf("secret reads %q", got)
			}
			for _, l := range strings.Split(must("cat", "/proc/self/mountinfo"), "\n") {
				if f := strings.Fields(l); len(f) > 5 && (f[4] == "/secret" || f[4] == "/secret-plain") &&
					!(strings.Contains(f[5], "ro,") && strings.Contains(f[5], "nosuid") && strings.Contains(f[5], "nodev") && strings.Contains(f[5], "noexec")) {
					t.Errorf("%s is mounted %s", f[4], f[5])
				}
			}
			// A mount the pod's mappings are not on is a plain bind: its root writes as 300000.
			must("touch", "/plain/by-pod-root")
			if got := owner(t, filepath.Join(plain, "by-pod-root")); got != "300000:300000" {
				t.Errorf("plain bind: the pod's root wrote as %s, want 300000:300000", got)
			}
			if m := testutil.MountsUnder(filepath.Join(e.Config.State, "idmapped-mounts")); len(m) > 0 {
				t.Errorf("idmapped clones left attached: %v", m)
			}
			if _, err := os.Stat(filepath.Join(e.Config.State, "idmapped-mounts", c)); !os.IsNotExist(err) {
				t.Errorf("the container's idmapped mounts dir is left: %v", err)
			}
		})
	}
}

// TestUsernsMountsRefused: mappings the runtime cannot apply are refused with InvalidArgument,
// and nothing is left attached: outside a pod of its own user namespace, other than the pod's,
// or with a propagation an idmapped clone cannot keep.
func TestUsernsMountsRefused(t *testing.T) {
	e := runtimetest.Start(t)
	makeSearchable(t, e.Dir)
	dir := t.TempDir()
	userns := usernsPod(e, "refused-userns", 300000)
	sbUserns := e.RunPod(userns, "runc")
	host := e.PodWithLogs("refused-host")
	sbHost := e.RunPod(host, "runc")
	m := userns.Linux.SecurityContext.NamespaceOptions.UsernsOptions
	other := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: 400000, Length: 65536}}
	for name, c := range map[string]struct {
		sb    string
		pod   *runtimeapi.PodSandboxConfig
		mount *runtimeapi.Mount
	}{
		"no user namespace": {sbHost, host, &runtimeapi.Mount{ContainerPath: "/v", HostPath: dir, UidMappings: m.Uids, GidMappings: m.Gids}},
		"other mappings":    {sbUserns, userns, &runtimeapi.Mount{ContainerPath: "/v", HostPath: dir, UidMappings: other, GidMappings: m.Gids}},
		"propagation": {sbUserns, userns, &runtimeapi.Mount{ContainerPath: "/v", HostPath: dir, UidMappings: m.Uids, GidMappings: m.Gids,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}},
	} {
		cfg := runtimetest.ContainerConfig("refused", "sleep", "1")
		cfg.Mounts = []*runtimeapi.Mount{proto.Clone(c.mount).(*runtimeapi.Mount)}
		_, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: c.sb, Config: cfg, SandboxConfig: c.pod})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if m := testutil.MountsUnder(filepath.Join(e.Config.State, "idmapped-mounts")); len(m) > 0 {
		t.Errorf("idmapped clones left attached: %v", m)
	}
}

// deviceLayer is a layer holding character and block device nodes under /hostile.
func deviceLayer(t *testing.T) ggcrv1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "hostile/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "hostile/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666},
		{Name: "hostile/sda", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 0, Mode: 0o666},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// suidInit is a setuid-root copy of the host's static catatonit in the hostile image: unlike
// busybox, it keeps the ids setuid gives it, so the host sees what a setuid program gets.
const suidInit = "bin/catatonit-suid"

// TestUsernsHostileImage runs a hostile image in a pod with its own user namespace, on the real
// image store: its device nodes cannot be opened (the rootfs stays nodev when idmapped), its root
// can make none (not in its rootfs, nor in an idmapped volume: device nodes need the host's
// CAP_MKNOD), and its setuid-root program gives a user of the pod only the pod's root, host uid
// 300000, never the host's.
func TestUsernsHostileImage(t *testing.T) {
	testutil.Require(t, "catatonit")
	catatonit, err := os.ReadFile(testutil.LookPath("catatonit"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(testimage.MustBusybox(testimage.WithFile("/"+suidInit, string(catatonit), 0o755|os.ModeSetuid)), deviceLayer(t))
	if err != nil {
		t.Fatal(err)
	}
	host := testimage.Serve(t, map[string]ggcrv1.Image{"hostile/userns:1": img})
	ref := host + "/hostile/userns:1"
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			var images *imagestore.Store
			e := runtimetest.Start(t, runtimetest.WithConfig(func(c *engine.Config) {
				st, err := imagestore.Open(filepath.Join(c.Root, "images"))
				if err != nil {
					t.Fatal(err)
				}
				images, c.Images = st, st
			}))
			makeSearchable(t, e.Dir)
			if _, err := images.Pull(e.Ctx(), ref, imagestore.PullOptions{}); err != nil {
				t.Fatal(err)
			}
			vol := filepath.Join(t.TempDir(), "vol")
			os.Mkdir(vol, 0o777)
			os.Chmod(vol, 0o777)
			pod := usernsPod(e, "hostile", 300000)
			sb := e.RunPod(pod, handler)
			u := pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions
			mount := &runtimeapi.Mount{ContainerPath: "/vol", HostPath: vol, UidMappings: u.Uids, GidMappings: u.Gids}

			root := runtimetest.ContainerConfig("root", "sleep", "1000")
			root.Image = &runtimeapi.ImageSpec{Image: ref}
			root.Mounts = []*runtimeapi.Mount{mount}
			rc := e.RunContainer(sb, pod, root)
			for _, cmd := range []string{
				"head -c 1 /hostile/mem", "head -c 1 /hostile/sda",
				"mknod /tmp/mem c 1 1", "mknod /vol/mem c 1 1", "mknod /vol/sda b 8 0", "cp -a /hostile/mem /vol/",
			} {
				resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: rc, Cmd: []string{"sh", "-c", cmd}, Timeout: 60})
				if err != nil {
					t.Fatal(err)
				}
				if resp.ExitCode == 0 {
					t.Errorf("%q succeeded in the pod", cmd)
				}
			}
			if ents, _ := os.ReadDir(vol); len(ents) > 0 {
				t.Errorf("the pod made %v in its volume", ents)
			}

			user := runtimetest.ContainerConfig("user", "/"+suidInit, "-P")
			user.Image = &runtimeapi.ImageSpec{Image: ref}
			user.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
			uc := e.RunContainer(sb, pod, user)
			st, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: uc, Verbose: true})
			if err != nil {
				t.Fatal(err)
			}
			var info struct{ Pid int }
			if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid <= 0 {
				t.Fatalf("container info %q: %v", st.Info["info"], err)
			}
			// real, effective, saved, filesystem: the pod's 1000 and the pod's root, as the host
			// sees them, once the OCI runtime has exec'd the program.
			var uids string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", info.Pid))
				if err != nil {
					t.Fatal(err)
				}
				var name string
				uids = ""
				for _, l := range strings.Split(string(b), "\n") {
					if f := strings.Fields(l); len(f) > 1 && f[0] == "Name:" {
						name = f[1]
					} else if len(f) == 5 && f[0] == "Uid:" {
						uids = strings.Join(f[1:], " ")
					}
				}
				if name == filepath.Base(suidInit) || time.Now().After(deadline) {
					break
				}
			}
			if uids != "301000 300000 300000 300000" {
				t.Errorf("the setuid program runs with host uids %q, want 301000 300000 300000 300000", uids)
			}
		})
	}
}
