//go:build cluster

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestClusterRuntimeClassGvisor: a pod chooses gVisor in a cluster by runtimeClassName. The
// apiserver's RuntimeClass admission gives the pod the class's overhead and node selector; the
// agent refuses the pod while the node lacks the selector's label (NodeAffinity, as the kubelet's
// admission does), and once the node has it runs the pod in one runsc sandbox, the pod's cgroup
// sized with the overhead.
func TestClusterRuntimeClassGvisor(t *testing.T) {
	testutil.Require(t, "runsc")
	e := newEnv(t, onNodelet)
	client := e.joinLoopbackCluster(t)
	ctx := context.Background()
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })

	const label = "sandbox.example/gvisor"
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("96Mi")}},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{label: "true"}}}
	if _, err := client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "gvisor"
	grace := int64(2)
	newPod := func(name string) *v1.Pod {
		res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")}
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: "e2e", RuntimeClassName: &class, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
					Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
	}

	// The node lacks the label: admission refuses the pod.
	refused, err := client.CoreV1().Pods("default").Create(ctx, newPod("gv-refused"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := refused.Spec.NodeSelector[label]; got != "true" {
		t.Fatalf("the apiserver did not merge the RuntimeClass's node selector: %v", refused.Spec.NodeSelector)
	}
	e.eventually("the pod refused for its node selector", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "gv-refused", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "NodeAffinity"
	})

	patch := `{"metadata":{"labels":{"` + label + `":"true"}}}`
	if _, err := client.CoreV1().Nodes().Patch(ctx, "e2e", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := client.CoreV1().Pods("default").Create(ctx, newPod("gv"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Overhead.Memory().Cmp(resource.MustParse("96Mi")) != 0 {
		t.Fatalf("the apiserver did not set the overhead: %v", created.Spec.Overhead)
	}
	e.eventually("the gVisor pod running", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "gv", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	// An apiserver pod's sandbox carries its own name (e.sandboxes looks for static pods' names).
	sandboxes := func() []*runtimeapi.PodSandbox {
		resp, err := e.rt.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(created.UID)}}})
		if err != nil {
			t.Fatalf("list sandboxes: %v", err)
		}
		return resp.Items
	}
	if sbs := sandboxes(); len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || sbs[0].RuntimeHandler != "runsc" {
		t.Fatalf("want one ready sandbox on runsc: %v", sbs)
	}
	// The pod's cgroup holds the gVisor sandbox; its memory limit is the container's plus the
	// overhead (cgroup v1 here; v2 names the file memory.max).
	limit := podMemoryLimit(t, e, string(created.UID))
	if want := int64((64 + 96) << 20); limit != want {
		t.Fatalf("pod cgroup memory limit %d, want %d (64Mi + 96Mi overhead)", limit, want)
	}

	if err := client.CoreV1().Pods("default").Delete(ctx, "gv", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the gVisor pod gone", func() bool { return len(sandboxes()) == 0 })
}

// podMemoryLimit reads the memory limit of the pod cgroup the agent made for uid under its root.
func podMemoryLimit(t *testing.T, e *env, uid string) int64 {
	t.Helper()
	var found []string
	for _, base := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		filepath.WalkDir(filepath.Join(base, e.cfg.PodsCgroup), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasSuffix(d.Name(), "pod"+uid) {
				found = append(found, p)
				return filepath.SkipDir
			}
			return nil
		})
		if len(found) > 0 {
			break
		}
	}
	if len(found) != 1 {
		t.Fatalf("pod cgroup of %s under %s: %v", uid, e.cfg.PodsCgroup, found)
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.max"} {
		if b, err := os.ReadFile(filepath.Join(found[0], f)); err == nil {
			var v int64
			if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &v); err == nil {
				return v
			}
		}
	}
	t.Fatalf("no memory limit in %s", found[0])
	return 0
}
