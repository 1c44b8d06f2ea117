package podsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodelet/nodelet/agent/manifest"
)

const rcYAML = `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: %s
handler: runsc
overhead:
  podFixed:
    cpu: 250m
    memory: %s
scheduling:
  nodeSelector:
    sandbox: gvisor
  tolerations:
  - key: sandbox
    operator: Exists
    effect: NoExecute
`

const rcPodYAML = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  runtimeClassName: %s
  containers:
  - name: app
    image: busybox:1
`

// folder is a manifest folder and a source reading it, read by hand so each step is deterministic.
type folder struct {
	t   *testing.T
	dir string
	src *ManifestDirSource
	bad map[string]error
}

func newFolder(t *testing.T, rcs *RuntimeClassSet) *folder {
	f := &folder{t: t, dir: t.TempDir(), bad: map[string]error{}}
	f.src = &ManifestDirSource{Path: f.dir, NodeName: "n", Log: slog.New(slog.DiscardHandler), RuntimeClasses: rcs,
		Errors: func(file string, err error) { f.bad[filepath.Base(file)] = err }}
	return f
}

func (f *folder) write(name, body string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// read returns the folder's pods by name (without the node suffix).
func (f *folder) read() map[string]*v1.Pod {
	clear(f.bad)
	out := map[string]*v1.Pod{}
	for _, p := range f.src.read() {
		out[strings.TrimSuffix(p.Name, "-n")] = p
	}
	return out
}

func TestManifestDirSourceAdmitsPodsAgainstItsRuntimeClasses(t *testing.T) {
	rcs := NewRuntimeClassSet()
	f := newFolder(t, rcs)
	f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "gvisor", "64Mi"))
	f.write("web.yaml", fmt.Sprintf(rcPodYAML, "web", "gvisor"))
	f.write("kata.yaml", fmt.Sprintf(rcPodYAML, "vm", "kata"))
	pods := f.read()

	web := pods["web"]
	if web == nil {
		t.Fatalf("web not read: pods %v, bad %v", pods, f.bad)
	}
	if got := web.Spec.Overhead.Memory().String(); got != "64Mi" || web.Spec.Overhead.Cpu().String() != "250m" {
		t.Errorf("overhead %v, want the RuntimeClass's", web.Spec.Overhead)
	}
	if web.Spec.NodeSelector["sandbox"] != "gvisor" || len(web.Spec.Tolerations) != 1 {
		t.Errorf("scheduling not applied: selector %v, tolerations %v", web.Spec.NodeSelector, web.Spec.Tolerations)
	}
	if h, err := rcs.Handler(context.Background(), "gvisor"); err != nil || h != "runsc" {
		t.Errorf("handler %q %v, want runsc", h, err)
	}
	// Naming no RuntimeClass of the folder refuses the pod as the apiserver would refuse to create it.
	if _, ok := pods["vm"]; ok {
		t.Error("a pod naming an undefined RuntimeClass was let through")
	}
	if err := f.bad["kata.yaml"]; !errors.Is(err, manifest.ErrPodRejected) || !strings.Contains(err.Error(), `RuntimeClass "kata" not found`) {
		t.Errorf("kata.yaml reported as %v, want the RuntimeClass not found", err)
	}
	if _, err := rcs.Handler(context.Background(), "kata"); !apierrors.IsNotFound(err) {
		t.Errorf("handler of kata: %v, want NotFound", err)
	}

	// A changed RuntimeClass is a new pod (a new UID), never a changed overhead under a running one.
	uid := web.UID
	f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "gvisor", "128Mi"))
	if web = f.read()["web"]; web == nil || web.UID == uid || web.Spec.Overhead.Memory().String() != "128Mi" {
		t.Errorf("after the RuntimeClass changed: %v", web)
	}

	// Removing every RuntimeClass brings back the name-is-the-handler convenience.
	os.Remove(filepath.Join(f.dir, "gvisor.yaml"))
	pods = f.read()
	if _, ok := pods["vm"]; !ok || len(f.bad) != 0 {
		t.Errorf("without RuntimeClasses: pods %v, bad %v", pods, f.bad)
	}
	if h, err := rcs.Handler(context.Background(), "kata"); err != nil || h != "kata" {
		t.Errorf("handler %q %v, want the name itself", h, err)
	}
}

func TestManifestDirSourceRefusesRuntimeClassesItWouldNotHonour(t *testing.T) {
	t.Run("in a cluster", func(t *testing.T) {
		f := newFolder(t, nil)
		f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "gvisor", "64Mi"))
		f.write("web.yaml", fmt.Sprintf(rcPodYAML, "web", "gvisor"))
		pods := f.read()
		if err := f.bad["gvisor.yaml"]; !errors.Is(err, manifest.ErrRuntimeClassOutsideFolder) {
			t.Errorf("gvisor.yaml reported as %v", err)
		}
		// The kubelet runs a static pod as written; its RuntimeClass is the apiserver's.
		if web := pods["web"]; web == nil || web.Spec.Overhead != nil {
			t.Errorf("web %v, want it unchanged", web)
		}
	})
	t.Run("defined twice", func(t *testing.T) {
		f := newFolder(t, NewRuntimeClassSet())
		f.write("a.yaml", fmt.Sprintf(rcYAML, "gvisor", "64Mi"))
		f.write("b.yaml", fmt.Sprintf(rcYAML, "gvisor", "128Mi")+"---\n"+fmt.Sprintf(rcPodYAML, "b", "gvisor"))
		f.write("web.yaml", fmt.Sprintf(rcPodYAML, "web", "gvisor"))
		pods := f.read()
		if err := f.bad["b.yaml"]; !errors.Is(err, ErrDuplicateRuntimeClass) || !strings.Contains(err.Error(), "a.yaml") {
			t.Errorf("b.yaml reported as %v", err)
		}
		if web := pods["web"]; web == nil || web.Spec.Overhead.Memory().String() != "64Mi" {
			t.Errorf("web %v, want the first definition's overhead", web)
		}
		if _, ok := pods["b"]; ok {
			t.Error("the refused file's pod was let through")
		}
	})
	t.Run("invalid", func(t *testing.T) {
		f := newFolder(t, NewRuntimeClassSet())
		f.write("bad.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: bad}\nhandler: Not_A_Label\n")
		f.read()
		if err := f.bad["bad.yaml"]; !errors.Is(err, manifest.ErrInvalidRuntimeClass) {
			t.Errorf("bad.yaml reported as %v", err)
		}
	})
}

func TestManifestURLSourceAdmitsAgainstTheFoldersRuntimeClasses(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, rcPodYAML, "web", "gvisor")
		served.Add(1)
	}))
	defer srv.Close()
	rcs := NewRuntimeClassSet()
	r := &recorder{ch: make(chan struct{}, 10)}
	var mu sync.Mutex
	var refused []error
	s := &ManifestURLSource{URL: srv.URL, NodeName: "n", Period: 10 * time.Millisecond, Set: r.set, RuntimeClasses: rcs,
		Errors: func(_ string, err error) { mu.Lock(); refused = append(refused, err); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	// Until the folder has been read, the URL's pods wait rather than run unadmitted.
	for served.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.mu.Lock()
	early := len(r.sets)
	r.mu.Unlock()
	if early != 0 {
		t.Fatal("the URL's pods were handed on before the folder's RuntimeClasses were read")
	}
	f := newFolder(t, rcs)
	f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "gvisor", "64Mi"))
	f.read()
	r.waitFor(t, "web with the overhead", func(p []*v1.Pod) bool {
		return len(p) == 1 && p[0].Spec.Overhead.Memory().String() == "64Mi"
	})
	// The same body is admitted again when the RuntimeClasses change.
	f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "gvisor", "128Mi"))
	f.read()
	r.waitFor(t, "web with the new overhead", func(p []*v1.Pod) bool {
		return len(p) == 1 && p[0].Spec.Overhead.Memory().String() == "128Mi"
	})
	f.write("gvisor.yaml", fmt.Sprintf(rcYAML, "other", "128Mi"))
	f.read()
	r.waitFor(t, "no pods", func(p []*v1.Pod) bool { return len(p) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(refused) == 0 || !strings.Contains(refused[len(refused)-1].Error(), `RuntimeClass "gvisor" not found`) {
		t.Errorf("refusals %v, want the RuntimeClass not found", refused)
	}
}
