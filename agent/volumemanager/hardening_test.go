package volumemanager

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// decoyFixture is a root dir beside a host folder ("decoy") that climbing names reach:
// base/root/pods/../../decoy is base/decoy.
func decoyFixture(t *testing.T) (root, decoy string) {
	t.Helper()
	base := t.TempDir()
	root, decoy = filepath.Join(base, "root"), filepath.Join(base, "decoy")
	if err := os.Mkdir(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, decoy
}

func checkDecoy(t *testing.T, root, decoy string) {
	t.Helper()
	st, err := os.Stat(decoy)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("decoy folder changed: %v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(decoy, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("decoy content changed: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(decoy); len(entries) != 1 {
		t.Fatalf("decoy holds %v", entries)
	}
	if _, err := os.Stat(podpath.PodsDir(root)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pods folder made for a refused pod: %v", err)
	}
	if mps := testutil.MountsUnder(filepath.Dir(root)); len(mps) > 0 {
		t.Fatalf("mounts made: %v", mps)
	}
}

// TestClimbingNamesAreRefused is the static pod with metadata.uid "../../decoy" (its folder was
// made and later removed outside the root dir) and the emptyDir named "../../../../../decoy"
// (the host folder was chmodded 0777 and bind mounted into the pod).
func TestClimbingNamesAreRefused(t *testing.T) {
	testutil.Require(t)
	emptyDir := v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
	memory := v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}
	downward := v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}
	cases := []struct {
		name string
		uid  string
		vol  v1.Volume
	}{
		{"uid climbs, emptyDir", "../../decoy", v1.Volume{Name: "d", VolumeSource: emptyDir}},
		{"uid climbs, downwardAPI", "../../decoy", v1.Volume{Name: "d", VolumeSource: downward}},
		{"uid is dot dot", "..", v1.Volume{Name: "d", VolumeSource: emptyDir}},
		{"uid has a slash", "a/b", v1.Volume{Name: "d", VolumeSource: emptyDir}},
		{"emptyDir name climbs", "u1", v1.Volume{Name: "../../../../../decoy", VolumeSource: emptyDir}},
		{"memory emptyDir name climbs", "u1", v1.Volume{Name: "../../../../../decoy", VolumeSource: memory}},
		{"downwardAPI name climbs", "u1", v1.Volume{Name: "../../../../../decoy", VolumeSource: downward}},
		{"volume name is dot", "u1", v1.Volume{Name: ".", VolumeSource: emptyDir}},
		{"volume name is empty", "u1", v1.Volume{Name: "", VolumeSource: emptyDir}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, decoy := decoyFixture(t)
			rec := record.NewFakeRecorder(10)
			m := &Manager{RootDir: root, Recorder: rec}
			pod := testPod(c.uid, c.vol)
			if err := m.Prepare(context.Background(), pod); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("prepare: %v, want ErrUnsafe", err)
			}
			if e := <-rec.Events; !strings.HasPrefix(e, "Warning FailedMount") || !strings.Contains(e, "not a single path element") {
				t.Fatalf("event %q", e)
			}
			checkDecoy(t, root, decoy)
		})
	}
}

func TestClimbingUIDTearDownRemovesNothing(t *testing.T) {
	testutil.Require(t)
	for _, uid := range []types.UID{"../../decoy", "..", "../../decoy/keep"} {
		t.Run(string(uid), func(t *testing.T) {
			root, decoy := decoyFixture(t)
			m := &Manager{RootDir: root}
			if err := m.TearDown(uid); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("teardown: %v", err)
			}
			if err := m.Unmount(uid); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("unmount: %v", err)
			}
			if err := m.TearDownVolumes(uid); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("teardown of volumes: %v", err)
			}
			checkDecoy(t, root, decoy)
		})
	}
}

func TestClimbingSubPathNamesAreRefused(t *testing.T) {
	testutil.Require(t)
	cases := []struct{ name, uid, volume, container string }{
		{"uid", "../../decoy", "v", "c"},
		{"volume", "u1", "../../../decoy", "c"},
		{"container", "u1", "v", "../../../../decoy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, decoy := decoyFixture(t)
			vol := t.TempDir()
			m := &Manager{RootDir: root}
			if _, err := m.SubPath(testPod(c.uid), c.container, 0, c.volume, vol, "."); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("subPath: %v", err)
			}
			checkDecoy(t, root, decoy)
		})
	}
}

// asNobody runs argv as uid/gid 65534, an unprivileged user of the host.
func asNobody(argv ...string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd.CombinedOutput()
}

// openRoot makes root and its parents traversable by everyone, so only the agent's own modes stand
// between another user and a pod's volumes (t.TempDir is 0700).
func openRoot(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(base, "root")
}

// TestVolumesPrivateOnTmpfs: every API-backed volume is its own nosuid,nodev tmpfs under folders
// no other host user can enter; the atomic ..data swap works there, the tmpfs grows with content,
// and teardown leaves no mount.
func TestVolumesPrivateOnTmpfs(t *testing.T) {
	testutil.Require(t)
	root := openRoot(t)
	if out, err := asNobody("ls", filepath.Dir(root)); err != nil {
		t.Fatalf("control: uid 65534 cannot list the test's folder: %v %s", err, out)
	}
	client := fake.NewSimpleClientset(
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"password": []byte("hunter2")}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"conf": "a=1"}},
	)
	m := &Manager{Client: kubefake.Wrap(client), RootDir: root}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-private"}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}},
		{Name: "downward", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		{Name: "projected", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	ctx := context.Background()
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dirs := []string{podpath.PodsDir(root), podDir(t, m, pod), filepath.Join(podDir(t, m, pod), "volumes")}
	vols := map[string]string{"secret": "password", "config": "conf", "downward": "name", "projected": "password"}
	for name := range vols {
		p, ok := m.Path(pod, name)
		if !ok {
			t.Fatalf("no path for %s", name)
		}
		dirs = append(dirs, filepath.Dir(p))
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is not on a tmpfs: %+v %v", name, st, err)
		}
		if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
			t.Errorf("%s tmpfs flags %#x, want nosuid,nodev", name, st.Flags)
		}
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v %v, want mode 0750", d, st, err)
		}
	}
	for name, file := range vols {
		p, _ := m.Path(pod, name)
		if out, err := asNobody("ls", p); err == nil {
			t.Errorf("uid 65534 lists volume %s: %s", name, out)
		}
		if out, err := asNobody("cat", filepath.Join(p, file)); err == nil {
			t.Errorf("uid 65534 reads volume %s: %s", name, out)
		}
	}
	if out, err := asNobody("ls", emptyDir(t, m, pod, "scratch")); err == nil {
		t.Errorf("uid 65534 lists the emptyDir: %s", out)
	}

	// An update swaps ..data on the tmpfs; content far beyond the first size grows it.
	big := strings.Repeat("x", 6<<20)
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Data: map[string]string{"conf": "a=2", "big": big}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cfg, _ := m.Path(pod, "config")
	if got := read(t, filepath.Join(cfg, "conf")); got != "a=2" {
		t.Fatalf("conf after update %q", got)
	}
	if got := read(t, filepath.Join(cfg, "big")); len(got) != len(big) {
		t.Fatalf("big file %d bytes", len(got))
	}

	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
}

// TestOldPodDirsAreClosed: folders an older version made 0755 are brought to 0750 at the next sync.
func TestOldPodDirsAreClosed(t *testing.T) {
	testutil.Require(t)
	root := openRoot(t)
	m := &Manager{RootDir: root}
	pod := testPod("u-old", v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	old := filepath.Join(root, "pods", "u-old", "volumes", podpath.EmptyDirPlugin, "d")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(old, 0o777)
	os.WriteFile(filepath.Join(old, "f"), []byte("x"), 0o644)
	t.Cleanup(func() { m.TearDown(pod.UID) })
	if out, err := asNobody("cat", filepath.Join(old, "f")); err != nil {
		t.Fatalf("control: the old layout is not readable: %v %s", err, out)
	}
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if out, err := asNobody("cat", filepath.Join(old, "f")); err == nil {
		t.Fatalf("uid 65534 reads the emptyDir after setup: %s", out)
	}
}
