package manifest

import (
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
)

// safeElement is the fuzz test's own idea of a name the agent may join under a directory: one
// element, not . or .., no separator or NUL, short enough for a file name.
func safeElement(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 255 && !strings.ContainsAny(s, "/\\\x00")
}

// FuzzPodsFromManifest feeds arbitrary bytes through decoding, defaulting and validation, as the
// file and URL sources do. It must never panic, and a pod it lets through must have a uid, volume
// names and container names that are safe path elements. Seeds: testdata/fuzz/FuzzPodsFromManifest.
func byName(rcs []*nodev1.RuntimeClass) map[string]*nodev1.RuntimeClass {
	out := map[string]*nodev1.RuntimeClass{}
	for _, rc := range rcs {
		out[rc.Name] = rc
	}
	return out
}

func FuzzPodsFromManifest(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox:1\n"))
	f.Add([]byte("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\noverhead:\n  podFixed:\n    memory: 64Mi\n---\nkind: Pod\nmetadata:\n  name: web\nspec:\n  runtimeClassName: gvisor\n  containers:\n  - name: app\n    image: busybox:1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, rcs, err := DecodeAll(data)
		if err != nil || DefaultAll(pods, "file", "/etc/nodelet/manifests/fuzz.yaml", "node1", RuntimeClasses(byName(rcs)).Admit) != nil {
			return
		}
		for _, p := range pods {
			if !safeElement(string(p.UID)) {
				t.Fatalf("pod %q let through with uid %q", p.Name, p.UID)
			}
			for _, v := range p.Spec.Volumes {
				if !safeElement(v.Name) {
					t.Fatalf("pod %q let through with volume %q", p.Name, v.Name)
				}
			}
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				if !safeElement(c.Name) {
					t.Fatalf("pod %q let through with container %q", p.Name, c.Name)
				}
			}
			if len(p.Spec.EphemeralContainers) > 0 {
				t.Fatalf("pod %q let through with ephemeral containers", p.Name)
			}
		}
	})
}
