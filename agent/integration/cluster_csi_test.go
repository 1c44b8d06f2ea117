//go:build cluster

package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/agent/pluginmanager"
	"github.com/nodelet/nodelet/test/harness/csidriver"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func TestClusterCSIOnNodeletRuntime(t *testing.T) { csiScenario(t, newEnv(t, onNodelet)) }
func TestClusterCSIOnContainerd(t *testing.T)     { csiScenario(t, newEnv(t, onContainerd)) }

// csiScenario: a CSI driver registers through the plugin registration folder, as
// node-driver-registrar registers one with the kubelet; the node records it (CSINode, node ID
// annotation, topology label); a pod's claim of a PV of the driver is staged and published (a
// loop device formatted ext4), the pod writes to it, and its deletion unpublishes and unstages it;
// a second pod finds what the first wrote.
func csiScenario(t *testing.T, e *env) {
	const driver = "csi.nodelet.test"
	client := e.joinLoopbackCluster(t)
	ctx := context.Background()
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })
	d := csidriver.Start(t, filepath.Join(t.TempDir(), "driver"), pluginmanager.Dir(e.cfg.RootDir), driver)
	if s := <-d.Statuses(); !s.PluginRegistered {
		t.Fatalf("the agent refused the driver: %s", s.Error)
	}
	e.eventually("the node's CSINode naming the driver", func() bool {
		n, err := client.StorageV1().CSINodes().Get(ctx, "e2e", metav1.GetOptions{})
		return err == nil && len(n.Spec.Drivers) == 1 && n.Spec.Drivers[0].Name == driver && n.Spec.Drivers[0].NodeID == d.NodeID &&
			slices.Equal(n.Spec.Drivers[0].TopologyKeys, []string{"topology.example.com/zone"}) && *n.Spec.Drivers[0].Allocatable.Count == 16
	})
	node, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids map[string]string
	if json.Unmarshal([]byte(node.Annotations["csi.volume.kubernetes.io/nodeid"]), &ids); ids[driver] != d.NodeID ||
		node.Labels["topology.example.com/zone"] != "z1" {
		t.Fatalf("node annotations %v labels %v", node.Annotations, node.Labels)
	}

	no, yes := false, true
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &yes}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := ""
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: "",
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1", FSType: "ext4"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &empty, VolumeName: "pv-1", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("64Mi")}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(2)
	writer := func(name, script string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: "e2e", TerminationGracePeriodSeconds: &grace,
			HostNetwork: true, RestartPolicy: v1.RestartPolicyNever,
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			Containers: []v1.Container{{Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", script},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, writer("first", "grep -q ext4 /proc/mounts && echo kept > /data/note && sync"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the first pod done", func() bool { return podPhase(ctx, client, "first") == v1.PodSucceeded })
	first, _ := client.CoreV1().Pods("default").Get(ctx, "first", metav1.GetOptions{})
	calls := d.Calls()
	if len(calls) < 2 || calls[0] != "stage vol-1" || !strings.HasPrefix(calls[1], "publish vol-1 ro=false ctx=") ||
		!strings.Contains(calls[1], "csi.storage.k8s.io/pod.name=first") || !strings.Contains(calls[1], "csi.storage.k8s.io/pod.uid="+string(first.UID)) {
		t.Fatalf("driver calls %q", calls)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the first pod's volume unpublished and unstaged", func() bool {
		c := d.Calls()
		return slices.Contains(c, "unpublish vol-1") && slices.Contains(c, "unstage vol-1")
	})
	if _, err := os.Stat(filepath.Join(e.cfg.RootDir, "plugins", "kubernetes.io/csi", driver)); err != nil {
		t.Fatalf("the driver's folder of the node: %v", err)
	}

	// A second pod: staged and published again, it finds the first one's file.
	if _, err := client.CoreV1().Pods("default").Create(ctx, writer("second", "cat /data/note"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the second pod done", func() bool { return podPhase(ctx, client, "second") == v1.PodSucceeded })
	if out := podLog(t, e, "second"); !strings.Contains(out, "kept") {
		t.Fatalf("the second pod read %q from the volume", out)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the second pod's volume released", func() bool {
		n := 0
		for _, c := range d.Calls() {
			if c == "unstage vol-1" {
				n++
			}
		}
		return n == 2
	})
	// Nothing of the volume stays mounted on the node (the pods' folders nor the staging path).
	if left := testutil.MountsUnder(filepath.Join(e.cfg.RootDir, "plugins"), filepath.Join(e.cfg.RootDir, "pods")); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
	blockScenario(t, e, client)
}

// blockScenario: a local PV of volumeMode Block (a loop device) is the device of the containers
// that name its claim in volumeDevices: one pod writes a sector, another reads it back; a pod
// mounting the claim as a folder is refused with the kubelet's words.
func blockScenario(t *testing.T, e *env, client kubernetes.Interface) {
	ctx := context.Background()
	dev := testutil.LoopDevice(t, 4<<20)
	block := v1.PersistentVolumeBlock
	empty := ""
	affinity := &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"e2e"}}}}}}}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-block"},
		Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("4Mi")}, VolumeMode: &block,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, NodeAffinity: affinity,
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "raw"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &empty, VolumeName: "pv-block", VolumeMode: &block,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("4Mi")}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(2)
	pod := func(name, script string, mount bool) *v1.Pod {
		c := v1.Container{Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", script}}
		if mount {
			c.VolumeMounts = []v1.VolumeMount{{Name: "raw", MountPath: "/raw"}}
		} else {
			c.VolumeDevices = []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvdz"}}
		}
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: "e2e", TerminationGracePeriodSeconds: &grace,
			HostNetwork: true, RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{c},
			Volumes: []v1.Volume{{Name: "raw", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "raw"}}}}}}
	}
	for _, p := range []*v1.Pod{
		pod("raw-writer", "test -b /dev/xvdz && echo block-kept | dd of=/dev/xvdz bs=512 count=1 conv=sync,fsync", false),
		pod("raw-reader", "dd if=/dev/xvdz bs=512 count=1 | tr -d '\\000'", false),
	} {
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(p.Name+" done", func() bool { return podPhase(ctx, client, p.Name) == v1.PodSucceeded })
	}
	if out := podLog(t, e, "raw-reader"); !strings.Contains(out, "block-kept") {
		t.Fatalf("the reader read %q from the device", out)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod("raw-mounter", "true", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the mounting pod refused", func() bool {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=raw-mounter"})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.Reason == "FailedMount" && strings.Contains(ev.Message, "volume raw has volumeMode Block, but is specified in volumeMounts") {
				return true
			}
		}
		return false
	})
	for _, name := range []string{"raw-writer", "raw-reader", "raw-mounter"} {
		if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// podLog is the first container's log of a finished apiserver pod, read through the agent's
// kept status and the log file CRI wrote.
func podLog(t *testing.T, e *env, pod string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(e.cfg.Kubelet.PodLogsDir, "default_"+pod+"_*", "app", "0.log"))
	if len(matches) != 1 {
		t.Fatalf("log of %s: %v", pod, matches)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
