package podspec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/volumemanager"
	"github.com/nodelet/nodelet/test/harness/kubefake"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// The fields of secret, configMap, downwardAPI and projected volumes, read back from the files the
// volume manager wrote.
func TestAPIVolumeFieldsReachTheFiles(t *testing.T) {
	testutil.Require(t) // the volumes are tmpfs mounts
	client := fake.NewClientset(
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"a": []byte("A"), "b": []byte("B")}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "ca", "b": "cb"}},
	)
	var tokenFor string
	var tokenSpec authenticationv1.TokenRequestSpec
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		tokenFor = c.(k8stesting.CreateActionImpl).Name
		tokenSpec = c.GetObject().(*authenticationv1.TokenRequest).Spec
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "tok",
			ExpirationTimestamp: metav1.Now()}}, nil
	})
	m := &volumemanager.Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-vol",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "hi"}},
		Spec: v1.PodSpec{ServiceAccountName: "robot", Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr(int32(0o440)),
				Items: []v1.KeyToPath{{Key: "a", Path: "dir/x", Mode: ptr(int32(0o600))}}}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: ptr(int32(0o640))}}},
			{Name: "o", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "absent", Optional: ptr(true)}}},
			{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: ptr(int32(0o444)),
				Items: []v1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: ptr(int32(0o600))},
					{Path: "note", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
					{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
					{Path: "one-note", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['note']"}}}}}},
			{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o400)),
				Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr(int64(7200)), Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"},
						Items: []v1.KeyToPath{{Key: "b", Path: "b", Mode: ptr(int32(0o604))}}}},
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
						{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}, Mode: ptr(int32(0o644))}}}},
				}}}},
		}}}
	t.Cleanup(func() {
		if err := m.TearDown(pod.UID); err != nil {
			t.Error(err)
		}
	})
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		volume, path, content string
		mode                  os.FileMode
	}{
		{"s", "dir/x", "A", 0o600},
		{"c", "a", "ca", 0o640},
		{"c", "b", "cb", 0o640},
		{"d", "labels", "app=\"x\"", 0o600},
		{"d", "note", "note=\"hi\"", 0o444},
		{"d", "app", "x", 0o444},
		{"d", "one-note", "hi", 0o444},
		{"p", "token", "tok", 0o400},
		{"p", "b", "cb", 0o604},
		{"p", "ns", "ns", 0o644},
	} {
		dir, ok := m.Path(pod, f.volume)
		if !ok {
			t.Fatalf("volume %s has no folder", f.volume)
		}
		p := filepath.Join(dir, f.path)
		b, err := os.ReadFile(p)
		st, serr := os.Stat(p)
		if err != nil || serr != nil || string(b) != f.content || st.Mode().Perm() != f.mode {
			t.Errorf("%s/%s: %q %v, mode %v %v; want %q %v", f.volume, f.path, b, err, st.Mode().Perm(), serr, f.content, f.mode)
		}
	}
	for _, absent := range []string{"s/b", "s/a", "p/gone"} {
		volume, path, _ := strings.Cut(absent, "/")
		dir, _ := m.Path(pod, volume)
		if _, err := os.Stat(filepath.Join(dir, path)); err == nil {
			t.Errorf("%s written", absent)
		}
	}
	if dir, _ := m.Path(pod, "o"); !isEmptyVolume(t, dir) {
		t.Errorf("optional volume of a missing secret is not empty")
	}
	if tokenFor != "robot" || len(tokenSpec.Audiences) != 1 || tokenSpec.Audiences[0] != "vault" ||
		tokenSpec.ExpirationSeconds == nil || *tokenSpec.ExpirationSeconds != 7200 {
		t.Errorf("token requested for %q with %+v", tokenFor, tokenSpec)
	}
}

// isEmptyVolume: a volume folder whose data holds no file.
func isEmptyVolume(t *testing.T, dir string) bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "..data"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(entries) == 0
}

// refusedVolumeKinds are the volume sources the table refuses, by their path under spec.volumes[].
func refusedVolumeKinds(t *testing.T) []string {
	var out []string
	for _, r := range volumesArea().rows {
		if r.verdict != refused {
			continue
		}
		for _, p := range expand(r.path) {
			out = append(out, strings.TrimPrefix(p, vol+"."))
		}
	}
	if len(out) == 0 {
		t.Fatal("the table refuses no volume kind")
	}
	return out
}

// member sets the one-of member of v named by its JSON name to an empty value of its type.
func member(t *testing.T, v any, name string) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		if strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0] == name {
			rv.Field(i).Set(reflect.New(rv.Field(i).Type().Elem()))
			return
		}
	}
	t.Fatalf("%T has no member %s", v, name)
}

// Every volume kind the table calls refused is refused with the message it quotes: a container
// mounting one does not start (CreateContainerConfigError), a projection the volume manager lacks
// fails the pod's mounts with a FailedMount event.
func TestUnsupportedVolumeIsRefused(t *testing.T) {
	for _, kind := range refusedVolumeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			pod := basePod()
			if proj, ok := strings.CutPrefix(kind, "projected.sources[]."); ok {
				var src v1.VolumeProjection
				member(t, &src, proj)
				pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
					Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{src}}}}}
				rec := record.NewFakeRecorder(10)
				m := &volumemanager.Manager{Client: kubefake.Wrap(fake.NewClientset()), RootDir: t.TempDir(), Recorder: rec}
				t.Cleanup(func() { m.TearDown(pod.UID) })
				const want = `MountVolume.SetUp failed: volume "data": unsupported projection (clusterTrustBundle and podCertificate are not supported)`
				if err := m.Prepare(context.Background(), pod); err == nil {
					t.Fatal("prepared")
				}
				if ev := <-rec.Events; ev != "Warning FailedMount "+want {
					t.Fatalf("event %q, want %q", ev, want)
				}
				return
			}
			pod.Spec.Volumes = []v1.Volume{{Name: "data"}}
			member(t, &pod.Spec.Volumes[0].VolumeSource, kind)
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			got := syncOnce(t, pod)
			const want = `volume "data": unsupported volume type (emptyDir, hostPath, persistentVolumeClaim, ephemeral, csi, image, secret, configMap, downwardAPI and projected are)`
			if got.err == nil || !strings.Contains(got.err.Error(), want) || !errors.Is(got.err, kubecontainer.ErrCreateConfig) || got.container != nil {
				t.Fatalf("sync: %v, container %v; want CreateContainerConfigError %q", got.err, got.container, want)
			}
		})
	}
}

// fsGroup owns a pod's emptyDir, so containers running as other users of that group share it;
// fsGroupChangePolicy does not change that: the kubelet hands the policy only to persistent volumes'
// plugins (CSI, local, iSCSI, FC, FlexVolume), and emptyDir applies the ownership whatever it says.
func TestFSGroupOwnsEmptyDir(t *testing.T) {
	for _, policy := range []*v1.PodFSGroupChangePolicy{nil, ptr(v1.FSGroupChangeAlways), ptr(v1.FSGroupChangeOnRootMismatch)} {
		name := "unset"
		if policy != nil {
			name = string(*policy)
		}
		t.Run(name, func(t *testing.T) {
			m := &volumemanager.Manager{RootDir: t.TempDir()}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-fsgroup"},
				Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{FSGroup: ptr(int64(4321)), FSGroupChangePolicy: policy},
					Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}}}
			t.Cleanup(func() { m.TearDown(pod.UID) })
			if err := m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			dir := filepath.Join(m.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "scratch")
			if err := syscall.Stat(dir, &st); err != nil {
				t.Fatal(err)
			}
			if st.Gid != 4321 || st.Mode&syscall.S_ISGID == 0 || st.Mode&0o070 != 0o070 {
				t.Fatalf("emptyDir group %d mode %o, want the fsGroup 4321, group rwx and setgid", st.Gid, st.Mode)
			}
		})
	}
}
