package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrepareWritesAPIVolumes(t *testing.T) {
	testutil.Require(t)
	client := fake.NewSimpleClientset(
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"password": []byte("hunter2")}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns"}, Data: map[string]string{"ca.crt": "CA", "other": "x"}},
	)
	tokens := 0
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokens++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: "token-1", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}, nil
	})
	m := &Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	t.Cleanup(func() { m.TearDown("u1") })
	optional := true
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "missing", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: &optional}}},
			{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			}}}},
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}}}
	ctx := context.Background()
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	sec, _ := m.Path(pod, "secret")
	if got := read(t, filepath.Join(sec, "password")); got != "hunter2" {
		t.Errorf("secret file %q", got)
	}
	api, _ := m.Path(pod, "kube-api-access")
	for f, want := range map[string]string{"token": "token-1", "ca.crt": "CA", "namespace": "ns"} {
		if got := read(t, filepath.Join(api, f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(api, "other")); err == nil {
		t.Error("item not asked for was written")
	}
	if _, ok := m.Path(pod, "scratch"); ok {
		t.Error("emptyDir claimed by the volume manager")
	}
	// A second prepare reuses the token until 80% of its life.
	if err := m.Prepare(ctx, pod); err != nil || tokens != 1 {
		t.Fatalf("second prepare: %v, %d token requests", err, tokens)
	}
}

func TestPrepareErrors(t *testing.T) {
	pod := func(v v1.Volume) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{v}}}
	}
	standalone := &Manager{RootDir: t.TempDir()}
	if err := standalone.Prepare(context.Background(), pod(v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{
		Secret: &v1.SecretVolumeSource{SecretName: "s"}}})); !errors.Is(err, ErrNoAPIServer) {
		t.Errorf("standalone secret: %v", err)
	}
	client := fake.NewSimpleClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"k": "v"}})
	m := &Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	t.Cleanup(func() { m.TearDown("u1") })
	for name, v := range map[string]v1.Volume{
		"missing config map": {Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}},
		"escaping path": {Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "c"}, Items: []v1.KeyToPath{{Key: "k", Path: "../../etc/passwd"}}}}},
		"missing key": {Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "c"}, Items: []v1.KeyToPath{{Key: "absent", Path: "a"}}}}},
	} {
		if err := m.Prepare(context.Background(), pod(v)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A CSI driver's token comes from the projected tokens' cache, with its expiry: asked again
// before 80% of its life it is the same token, after it a new one.
func TestTokenStatusForCSIDrivers(t *testing.T) {
	client := fake.NewSimpleClientset()
	issued := 0
	var audiences []string
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		issued++
		req := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		audiences = append(audiences, req.Spec.Audiences...)
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprint("token-", issued), ExpirationTimestamp: metav1.NewTime(time.Unix(1000+3600, 0))}}, nil
	})
	now := time.Unix(1000, 0)
	m := &Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir(), Now: func() time.Time { return now }}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	for _, step := range []struct {
		after time.Duration
		want  string
	}{{0, "token-1"}, {2000 * time.Second, "token-1"}, {3000 * time.Second, "token-2"}} {
		now = time.Unix(1000, 0).Add(step.after)
		st, err := m.TokenStatus(context.Background(), pod, "vault", nil)
		if err != nil || st.Token != step.want || st.ExpirationTimestamp.IsZero() {
			t.Fatalf("after %v: %+v %v, want %s", step.after, st, err, step.want)
		}
	}
	if !slices.Equal(audiences, []string{"vault", "vault"}) {
		t.Errorf("audiences asked for %v", audiences)
	}
}
