package podobjects

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

func secret(name, value string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{"k": []byte(value)}}
}

func configMap(name, value string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"k": value}}
}

// podUsing references secret s through a volume and config map c through an env var.
func podUsing(uid, s, c string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + uid, UID: types.UID(uid)},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: s}}}},
			Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "E", ValueFrom: &v1.EnvVarSource{
				ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: c}, Key: "k"}}}}}},
		},
	}
}

// calls counts the fake apiserver's requests by verb and resource.
func calls(c *kubefake.Client, verb, resource string) int {
	n := 0
	for _, a := range c.Interface.(interface{ Actions() []k8stesting.Action }).Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c
}

func TestWatchServesReadsFromOneWatchPerObject(t *testing.T) {
	client := kubefake.New(secret("s", "one"), configMap("c", "a"))
	m, err := New(client, Config{Strategy: Watch})
	if err != nil {
		t.Fatal(err)
	}
	m.RegisterPod(podUsing("1", "s", "c"))
	for range 3 {
		s, err := m.Secret(ctx(t), "ns", "s")
		if err != nil || string(s.Data["k"]) != "one" {
			t.Fatalf("secret: %v %v", s, err)
		}
		c, err := m.ConfigMap(ctx(t), "ns", "c")
		if err != nil || c.Data["k"] != "a" {
			t.Fatalf("config map: %v %v", c, err)
		}
	}
	if g := calls(client, "get", "secrets") + calls(client, "get", "configmaps"); g != 0 {
		t.Errorf("%d GETs under Watch", g)
	}
	if l := calls(client, "list", "secrets"); l != 1 {
		t.Errorf("%d lists of the secret, want 1", l)
	}
	// A change reaches the reads through the watch.
	if _, err := client.CoreV1().Secrets("ns").Update(ctx(t), secret("s", "two"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		s, err := m.Secret(ctx(t), "ns", "s")
		return err == nil && string(s.Data["k"]) == "two"
	})
}

func TestReadsOfWhatNoPodReferences(t *testing.T) {
	for _, strategy := range []string{Watch, Cache} {
		t.Run(strategy, func(t *testing.T) {
			client := kubefake.New(secret("s", "one"))
			m, err := New(client, Config{Strategy: strategy})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Secret(ctx(t), "ns", "s"); err == nil || err.Error() != `object "ns"/"s" not registered` {
				t.Errorf("unregistered read: %v", err)
			}
			m.RegisterPod(podUsing("1", "s", "gone"))
			_, err = m.ConfigMap(ctx(t), "ns", "gone")
			// The watch says it as the kubelet's watching manager does; Cache passes the
			// apiserver's own error on (which names the resource in the plural).
			want := map[string]string{Watch: `configmap "gone" not found`, Cache: `configmaps "gone" not found`}[strategy]
			if !apierrors.IsNotFound(err) || err.Error() != want {
				t.Errorf("missing config map: %v, want %s", err, want)
			}
			m.UnregisterPod("1")
			if _, err := m.Secret(ctx(t), "ns", "s"); err == nil || !strings.Contains(err.Error(), "not registered") {
				t.Errorf("read after the pod left: %v", err)
			}
		})
	}
}

func TestWatchStopsForImmutableAndIdleObjects(t *testing.T) {
	immutable := true
	s := secret("s", "one")
	s.Immutable = &immutable
	client := kubefake.New(s, configMap("c", "a"))
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m, err := New(client, Config{Strategy: Watch, SyncFrequency: time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	m.RegisterPod(podUsing("1", "s", "c"))
	if _, err := m.Secret(ctx(t), "ns", "s"); err != nil {
		t.Fatal(err)
	}
	store := m.secrets.(*watchStore[*v1.Secret])
	it := store.items[objectKey{"ns", "s"}]
	it.mu.Lock()
	watching, frozen := it.cancel != nil, it.immutable
	it.mu.Unlock()
	if watching || !frozen {
		t.Errorf("immutable secret: watching %v, immutable %v", watching, frozen)
	}
	// Read again: served from what was read, no new list.
	if s, err := m.Secret(ctx(t), "ns", "s"); err != nil || string(s.Data["k"]) != "one" || calls(client, "list", "secrets") != 1 {
		t.Errorf("immutable secret read again: %v %v, %d lists", s, err, calls(client, "list", "secrets"))
	}

	if _, err := m.ConfigMap(ctx(t), "ns", "c"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(5 * time.Minute) // five sync periods without a read
	mu.Unlock()
	for _, s := range m.idle {
		s.stopIdle(clock())
	}
	cs := m.configMaps.(*watchStore[*v1.ConfigMap])
	ci := cs.items[objectKey{"ns", "c"}]
	ci.mu.Lock()
	stopped := ci.cancel == nil
	ci.mu.Unlock()
	if !stopped {
		t.Fatal("an idle watch was not stopped")
	}
	// The next read starts it again and waits for its list.
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx(t), configMap("c", "b"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, err := m.ConfigMap(ctx(t), "ns", "c"); err != nil || c.Data["k"] != "b" {
		t.Errorf("read after an idle stop: %v %v", c, err)
	}
	if l := calls(client, "list", "configmaps"); l != 2 {
		t.Errorf("%d lists of the config map, want 2", l)
	}
}

func TestCacheKeepsObjectsForTheNodesTTL(t *testing.T) {
	client := kubefake.New(secret("s", "one"), configMap("c", "a"))
	now := time.Unix(1000, 0)
	ttl := "30"
	node := func() (*v1.Node, error) {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.ObjectTTLAnnotationKey: ttl}}}, nil
	}
	m, err := New(client, Config{Strategy: Cache, Now: func() time.Time { return now }, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	m.RegisterPod(podUsing("1", "s", "c"))
	read := func(want string) {
		t.Helper()
		s, err := m.Secret(ctx(t), "ns", "s")
		if err != nil || string(s.Data["k"]) != want {
			t.Fatalf("secret: %v %v, want %q", s, err, want)
		}
	}
	read("one")
	read("one")
	if g := calls(client, "get", "secrets"); g != 1 {
		t.Fatalf("%d GETs within the TTL, want 1", g)
	}
	if _, err := client.CoreV1().Secrets("ns").Update(ctx(t), secret("s", "two"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read("one") // still within the TTL
	now = now.Add(31 * time.Second)
	read("two")
	if g := calls(client, "get", "secrets"); g != 2 {
		t.Errorf("%d GETs after the TTL, want 2", g)
	}
	// The same pod registered again fetches nothing; a new pod using the secret does.
	m.RegisterPod(podUsing("1", "s", "c"))
	read("two")
	if g := calls(client, "get", "secrets"); g != 2 {
		t.Errorf("%d GETs after the same pod registered again, want 2", g)
	}
	m.RegisterPod(podUsing("2", "s", "c"))
	read("two")
	if g := calls(client, "get", "secrets"); g != 3 {
		t.Errorf("%d GETs after a new pod registered, want 3", g)
	}
	// A TTL of 0 (clusters of up to 100 nodes) reads at every use.
	ttl = "0"
	read("two")
	read("two")
	if g := calls(client, "get", "secrets"); g != 5 {
		t.Errorf("%d GETs with a TTL of 0, want 5", g)
	}
}

func TestGetReadsAtEveryUse(t *testing.T) {
	client := kubefake.New(secret("s", "one"))
	m, err := New(client, Config{Strategy: Get})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := m.Secret(ctx(t), "ns", "s"); err != nil {
			t.Fatal(err)
		}
	}
	if g := calls(client, "get", "secrets"); g != 2 {
		t.Errorf("%d GETs, want 2", g)
	}
}

func TestUnknownStrategyIsRefused(t *testing.T) {
	if _, err := New(kubefake.New(), Config{Strategy: "Poll"}); err == nil || !strings.Contains(err.Error(), "configMapAndSecretChangeDetectionStrategy") {
		t.Errorf("New with Poll: %v", err)
	}
}

func TestUnregisterStopsTheWatchOnlyWithItsLastPod(t *testing.T) {
	client := kubefake.New(secret("s", "one"), configMap("c", "a"))
	m, err := New(client, Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.RegisterPod(podUsing("1", "s", "c"))
	m.RegisterPod(podUsing("2", "s", "c"))
	m.UnregisterPod("1")
	m.UnregisterPod("1") // twice is once
	if _, err := m.Secret(ctx(t), "ns", "s"); err != nil {
		t.Fatalf("read while pod 2 still uses it: %v", err)
	}
	store := m.secrets.(*watchStore[*v1.Secret])
	it := store.items[objectKey{"ns", "s"}]
	m.UnregisterPod("2")
	it.mu.Lock()
	stopped := it.cancel == nil
	it.mu.Unlock()
	if !stopped || len(store.items) != 0 {
		t.Errorf("after the last pod left: stopped %v, %d items", stopped, len(store.items))
	}
}

func TestReferencesOfEveryKind(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
		InitContainers:   []v1.Container{{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "init-env"}}}}}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "debug-env"}}}}}}},
		Volumes: []v1.Volume{
			{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-s"}}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-c"}}},
			}}}},
			{VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{NodePublishSecretRef: &v1.LocalObjectReference{Name: "csi"}}}},
			{VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "vol-c"}}}},
		},
	}}
	got := func(m map[string]bool) string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	}
	if s := got(secretNames(pod)); s != "csi,init-env,proj-s,pull" {
		t.Errorf("secrets: %s", s)
	}
	if c := got(configMapNames(pod)); c != "debug-env,proj-c,vol-c" {
		t.Errorf("config maps: %s", c)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a guard against a hang only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
