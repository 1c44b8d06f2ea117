package podsource

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/manifest"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: app
    image: %s
`

func recv(t *testing.T, c *PodConfig) PodUpdate {
	t.Helper()
	select {
	case u := <-c.Updates():
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update")
	}
	return PodUpdate{}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestMergerOps(t *testing.T) {
	c := NewPodConfig(nil)
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "1"}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "2"}}
	go c.Set("api", []*v1.Pod{a, b})
	if u := recv(t, c); u.Op != ADD || len(u.Pods) != 2 {
		t.Fatalf("first set: %v %v", u.Op, names(u.Pods))
	}
	a2 := a.DeepCopy()
	a2.Spec.NodeName = "n"
	b2 := b.DeepCopy()
	b2.Status.Phase = v1.PodRunning
	go c.Set("api", []*v1.Pod{a2, b2})
	got := map[PodOperation][]string{}
	for i := 0; i < 2; i++ {
		u := recv(t, c)
		got[u.Op] = names(u.Pods)
	}
	if fmt.Sprint(got) != fmt.Sprint(map[PodOperation][]string{UPDATE: {"a"}, RECONCILE: {"b"}}) {
		t.Fatalf("second set: %v", got)
	}
	a3 := a2.DeepCopy()
	now := metav1.Now()
	a3.DeletionTimestamp = &now
	go c.Set("api", []*v1.Pod{a3})
	got = map[PodOperation][]string{}
	for i := 0; i < 2; i++ {
		u := recv(t, c)
		got[u.Op] = names(u.Pods)
	}
	if fmt.Sprint(got) != fmt.Sprint(map[PodOperation][]string{DELETE: {"a"}, REMOVE: {"b"}}) {
		t.Fatalf("third set: %v", got)
	}
	// Ready once the SyncLoop has handled a set of the source, as the kubelet's sourcesReady.
	if c.SeenAllSources([]string{"api"}) {
		t.Fatal("SeenAllSources before the SyncLoop handled the source's set")
	}
	c.SourceHandled("api")
	if !c.SeenAllSources([]string{"api"}) || c.SeenAllSources([]string{"api", "file"}) {
		t.Fatal("SeenAllSources")
	}
}

type recorder struct {
	mu   sync.Mutex
	sets [][]*v1.Pod
	errs []string
	ch   chan struct{}
}

func (r *recorder) set(_ string, pods []*v1.Pod) {
	r.mu.Lock()
	r.sets = append(r.sets, pods)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// waitFor waits for a set satisfying ok; the timeout only guards against a hang.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]*v1.Pod) bool) []*v1.Pod {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		if n := len(r.sets); n > 0 && ok(r.sets[n-1]) {
			p := r.sets[n-1]
			r.mu.Unlock()
			return p
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("no set with %s", what)
		}
	}
}

func TestManifestDirSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", fmt.Sprintf(podYAML, "web", "busybox:1")+"---\n"+fmt.Sprintf(podYAML, "db", "busybox:1"))
	write("bad.yaml", "kind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n")
	write(".hidden.yaml", fmt.Sprintf(podYAML, "hidden", "busybox:1"))
	r := &recorder{ch: make(chan struct{}, 10)}
	var badFiles []string
	var mu sync.Mutex
	s := &ManifestDirSource{Path: dir, NodeName: "Node1", Set: r.set, Errors: func(f string, err error) {
		mu.Lock()
		badFiles = append(badFiles, filepath.Base(f))
		mu.Unlock()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	pods := r.waitFor(t, "web and db", func(p []*v1.Pod) bool { return len(p) == 2 })
	web := pods[0]
	if web.Name != "web-node1" || web.Namespace != "default" || web.Spec.NodeName != "Node1" || web.UID == "" ||
		web.Annotations[ConfigSourceAnnotation] != "file" || web.Spec.RestartPolicy != v1.RestartPolicyAlways ||
		web.Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Fatalf("defaults not applied: %+v", web)
	}
	mu.Lock()
	if len(badFiles) == 0 || badFiles[0] != "bad.yaml" {
		t.Fatalf("bad manifest not reported: %v", badFiles)
	}
	mu.Unlock()
	uid := web.UID

	// Edit: the changed pod gets a new UID; the other keeps its own.
	write("web.yaml", fmt.Sprintf(podYAML, "web", "busybox:2"))
	pods = r.waitFor(t, "web edited", func(p []*v1.Pod) bool { return len(p) == 1 && p[0].Spec.Containers[0].Image == "busybox:2" })
	if pods[0].UID == uid {
		t.Fatal("edited manifest kept its UID")
	}
	// Delete.
	os.Remove(filepath.Join(dir, "web.yaml"))
	r.waitFor(t, "no pods", func(p []*v1.Pod) bool { return len(p) == 0 })
}

func TestUIDIsStableAcrossReads(t *testing.T) {
	a, _ := manifest.Decode([]byte(fmt.Sprintf(podYAML, "web", "busybox:1")))
	b, _ := manifest.Decode([]byte(fmt.Sprintf(podYAML, "web", "busybox:1")))
	manifest.Default(a[0], FileSource, "/m/web.yaml#0", "n")
	manifest.Default(b[0], FileSource, "/m/web.yaml#0", "n")
	if a[0].UID != b[0].UID {
		t.Fatal("same manifest, different UIDs")
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, body := range map[string]string{
		"wrong kind":        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n",
		"wrong apiVersion":  "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: x}\n",
		"not yaml":          "{{{",
		"no containers":     "kind: Pod\nmetadata: {name: x}\n",
		"bad restartPolicy": "kind: Pod\nmetadata: {name: x}\nspec: {restartPolicy: Sometimes, containers: [{name: a, image: b}]}\n",
		"duplicate names":   "kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a, image: b}]}\n",
		"no image":          "kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			pods, err := manifest.Decode([]byte(body))
			if err == nil {
				for _, p := range pods {
					if err = manifest.Default(p, FileSource, "f", "n"); err != nil {
						break
					}
				}
			}
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestManifestURLSource(t *testing.T) {
	body := "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: busybox:1}]}\n- metadata: {name: b}\n  spec: {containers: [{name: c, image: busybox:1}]}\n"
	const bad = "not: [valid"
	var mu sync.Mutex
	badServed := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if body == bad {
			badServed++
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	r := &recorder{ch: make(chan struct{}, 10)}
	s := &ManifestURLSource{URL: srv.URL, NodeName: "n", Period: 10 * time.Millisecond, Set: r.set}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	r.waitFor(t, "two pods", func(p []*v1.Pod) bool { return len(p) == 2 && p[0].Annotations[ConfigSourceAnnotation] == "http" })
	mu.Lock()
	body = bad
	mu.Unlock()
	// The source polls one request at a time, so a second bad fetch means the first was handled.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := badServed
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source never fetched the bad body twice")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	last := r.sets[len(r.sets)-1]
	r.mu.Unlock()
	if len(last) != 2 {
		t.Fatal("a bad body replaced the last good set")
	}
}

func TestAPISource(t *testing.T) {
	mine := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "1"}, Spec: v1.PodSpec{NodeName: "n1"}}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "2"}, Spec: v1.PodSpec{NodeName: "n2"}}
	client := fake.NewSimpleClientset(mine, other)
	r := &recorder{ch: make(chan struct{}, 10)}
	s := &APISource{Client: kubefake.Wrap(client), NodeName: "n1", Set: r.set}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	r.waitFor(t, "my pod", func(p []*v1.Pod) bool {
		return len(p) == 1 && p[0].Name == "a" && p[0].Annotations[ConfigSourceAnnotation] == "api"
	})
	c := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "3"}, Spec: v1.PodSpec{NodeName: "n1"}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "two pods", func(p []*v1.Pod) bool { return len(p) == 2 })
}

// ConfigMaps and Secrets beside static pods feed their volumes; the pods in the same file still run.
func TestDecodeSkipsConfigMapsAndSecrets(t *testing.T) {
	body := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n---\n" +
		fmt.Sprintf(podYAML, "web", "busybox:1")
	pods, err := manifest.Decode([]byte(body))
	if err != nil || len(pods) != 1 || pods[0].Name != "web" {
		t.Fatalf("pods %v, err %v; want just web", pods, err)
	}
}

// TestListedNamesEverySourcesPods: what the sources list, across sources, until they drop it.
func TestListedNamesEverySourcesPods(t *testing.T) {
	c := NewPodConfig(nil)
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "1"}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "other", UID: "2"}}
	go c.Set("file", []*v1.Pod{a})
	recv(t, c)
	go c.Set("api", []*v1.Pod{b})
	recv(t, c)
	if got := c.Listed(); len(got) != 2 || !got["ns/a"] || !got["other/b"] {
		t.Fatalf("listed %v", got)
	}
	go c.Set("file", nil)
	recv(t, c)
	if got := c.Listed(); len(got) != 1 || !got["other/b"] {
		t.Fatalf("after the file source dropped a: %v", got)
	}
}
