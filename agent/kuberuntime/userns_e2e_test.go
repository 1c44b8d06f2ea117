package kuberuntime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/userns"
	"github.com/nodelet/nodelet/agent/volumemanager"
	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// searchableTemp is a temp dir whose parents a mapped root can search (t.TempDir makes them
// 0700): nodelet's runtime supports user namespaces only where its rootfs dirs can be reached.
func searchableTemp(t *testing.T) string {
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func hostOwner(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// TestHostUsersFalseOnTheRealRuntime runs hostUsers:false pods on nodelet's runtime with runc,
// as the agent runs them: each container is in a user namespace whose ids start at the pod's
// range (not the identity map), its processes are that range on the host, two pods get disjoint
// ranges, and the pod's volumes work as the kubelet's do on containerd 2: an emptyDir and a
// root-owned hostPath are written by the pod's root (idmapped: the files are host uid 0's, as a
// pod of the host's ids would leave them), a secret and a config map are read. A new manager over
// the same root dir, an agent restarted, gives the running pod the same range.
func TestHostUsersFalseOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(searchableTemp(t), "rt"))
	image := rt.Push(t, "busybox:userns", nil)
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}, Data: map[string]string{"conf": "from a config map"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sec"}, Data: map[string][]byte{"key": []byte("from a secret")}},
	)
	root := t.TempDir()
	hostPath := filepath.Join(t.TempDir(), "host")
	vols := &volumemanager.Manager{Client: kubefake.Wrap(client), RootDir: root}
	newManager := func() *Manager {
		u, err := userns.New(userns.Config{RootDir: root, MaxPods: 110, Handlers: userns.RuntimeHandlers{Runtime: rt.RS}})
		if err != nil {
			t.Fatal(err)
		}
		return NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: root, PodLogsDir: t.TempDir(),
			Volumes: vols, EnvData: vols, SubPaths: vols, Userns: u})
	}
	m := newManager()
	ctx := context.Background()
	dirOrCreate := v1.HostPathDirectoryOrCreate
	mkPod := func(name string) *v1.Pod {
		pod := testPod(v1.RestartPolicyAlways, nil, "app")
		pod.Name, pod.UID = name, types.UID("uid-e2e-"+name)
		pod.Spec.HostUsers = new(bool)
		pod.Spec.Volumes = []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostPath, Type: &dirOrCreate}}},
			{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		}
		c := &pod.Spec.Containers[0]
		c.Image, c.Command = image, []string{"sleep", "3600"}
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "host", MountPath: "/host"},
			{Name: "sec", MountPath: "/sec"}, {Name: "cm", MountPath: "/cm"}}
		t.Cleanup(func() {
			st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
			if err == nil {
				zero := int64(0)
				m.KillPod(ctx, pod, st, &zero)
				m.RemovePod(ctx, st)
			}
			vols.TearDown(pod.UID)
		})
		return pod
	}
	sync := func(pod *v1.Pod) {
		t.Helper()
		if err := vols.Prepare(ctx, pod); err != nil {
			t.Fatal(err)
		}
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncPod(ctx, pod, st); err != nil {
			t.Fatal(err)
		}
	}
	container := func(pod *v1.Pod) (id string, pid int) {
		t.Helper()
		cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}}})
		if err != nil || len(cs.Containers) != 1 {
			t.Fatalf("containers of %s: %v %v", pod.Name, cs, err)
		}
		st, err := rt.RS.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.Containers[0].Id, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ Pid int }
		if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid <= 0 {
			t.Fatalf("container info %q: %v", st.Info["info"], err)
		}
		return cs.Containers[0].Id, info.Pid
	}
	rangeOf := func(pod *v1.Pod) uint32 {
		t.Helper()
		u, err := m.Userns.GetOrCreateUserNamespaceMappings(ctx, pod, "")
		if err != nil {
			t.Fatal(err)
		}
		return u.Uids[0].HostId
	}

	a, b := mkPod("a"), mkPod("b")
	sync(a)
	sync(b)
	first := rangeOf(a)
	if other := rangeOf(b); first < 65536 || other < 65536 || first == other {
		t.Fatalf("ranges %d and %d: want two of their own above the host's first 65536 ids", first, other)
	}
	id, pid := container(a)
	if got := strings.Join(strings.Fields(rt.Exec(t, id, "cat", "/proc/self/uid_map")), " "); got != fmt.Sprintf("0 %d 65536", first) {
		t.Fatalf("uid_map %q, want the pod's range from %d", got, first)
	}
	if got := strings.Join(strings.Fields(rt.Exec(t, id, "cat", "/proc/self/gid_map")), " "); got != fmt.Sprintf("0 %d 65536", first) {
		t.Fatalf("gid_map %q", got)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Uid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\n", first); !strings.Contains(string(status), want) {
		t.Errorf("the container's root is not host uid %d on the host:\n%s", first, status)
	}

	rt.Exec(t, id, "sh", "-c", "echo a > /scratch/by-root && echo a > /host/by-root && mkdir /host/dir-by-root")
	if got := rt.Exec(t, id, "cat", "/sec/key", "/cm/conf"); got != "from a secretfrom a config map" {
		t.Errorf("API volumes read %q", got)
	}
	if got := rt.Exec(t, id, "stat", "-c", "%u:%g", "/scratch/by-root", "/host/by-root", "/sec/key", "/cm/conf"); got != "0:0\n0:0\n0:0\n0:0\n" {
		t.Errorf("owners in the container:\n%s", got)
	}
	scratch := filepath.Join(root, "pods", string(a.UID), "volumes", "kubernetes.io~empty-dir", "scratch")
	for _, p := range []string{filepath.Join(scratch, "by-root"), filepath.Join(hostPath, "by-root"), filepath.Join(hostPath, "dir-by-root")} {
		if got := hostOwner(t, p); got != "0:0" {
			t.Errorf("%s is owned by %s on the host, want 0:0 (idmapped, as containerd 2 writes it)", p, got)
		}
	}

	// Restarted: the running pod keeps its range, and its next sync changes nothing.
	m = newManager()
	if got := rangeOf(a); got != first {
		t.Fatalf("after a restart pod a has %d, had %d", got, first)
	}
	sync(a)
	if again, _ := container(a); again != id {
		t.Fatalf("after a restart pod a's container was replaced: %s, was %s", again, id)
	}
}
