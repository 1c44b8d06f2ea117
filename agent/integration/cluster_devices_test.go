//go:build cluster

package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/agent/cm/devicemanager"
	"github.com/nodelet/nodelet/agent/podresources"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

const sampleResource = "example.com/resource"

// pushSampleDevicePlugin pushes an image of the upstream sample device plugin (Kubernetes' own
// test/images/sample-device-plugin, built by hack/kube/build.sh) over busybox, as the e2e suite's
// registry.k8s.io/e2e-test-images/sample-device-plugin image is made, and returns its reference.
func pushSampleDevicePlugin(t *testing.T, reg string) string {
	t.Helper()
	bin := filepath.Join(kubeBinDir(), "sample-device-plugin")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s missing: build it with hack/kube/build.sh sample-device-plugin, or set KUBE_BIN_DIR", bin)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	tw.WriteHeader(&tar.Header{Name: "sample-device-plugin", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))})
	tw.Write(b)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	ref := reg + "/sample-device-plugin:1.7"
	pushImage(t, ref, func(c *ggcrv1.Config) { c.Entrypoint = []string{"/sample-device-plugin"} }, crirt.BusyboxLayer(t), layer)
	return ref
}

// sampleDevicePluginPod is the plugin as the e2e suite deploys it (its DaemonSet's pod), with the
// node's device plugin folder mounted where the plugin hard-codes it.
func sampleDevicePluginPod(image, pluginDir string) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sample-device-plugin", Namespace: "kube-system"},
		Spec: v1.PodSpec{NodeName: "e2e", TerminationGracePeriodSeconds: &grace,
			Volumes: []v1.Volume{{Name: "device-plugin", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: pluginDir}}}},
			Containers: []v1.Container{{Name: "sample-device-plugin", Image: image,
				Env:          []v1.EnvVar{{Name: "PLUGIN_SOCK_DIR", Value: "/var/lib/kubelet/device-plugins"}},
				VolumeMounts: []v1.VolumeMount{{Name: "device-plugin", MountPath: "/var/lib/kubelet/device-plugins"}}}}}}
}

func podResourcesClient(t *testing.T, rootDir string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+podresources.SocketPath(rootDir), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}

// listedDevices are the devices the PodResources API lists for a pod's container, "" when it
// lists none or cannot be reached.
func listedDevices(c podresourcesv1.PodResourcesListerClient, pod, container string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: pod, PodNamespace: "default"})
	if err != nil {
		return ""
	}
	var ids []string
	for _, ct := range resp.PodResources.Containers {
		if ct.Name != container {
			continue
		}
		for _, d := range ct.Devices {
			if d.ResourceName == sampleResource {
				ids = append(ids, d.DeviceIds...)
			}
		}
	}
	return strings.Join(ids, ",")
}

// TestClusterDevicePlugin: the upstream sample device plugin, unchanged and run as a pod the way
// the e2e suite deploys it, registers with the agent;
// its two devices become the Node's example.com/resource; the scheduler places a pod limited to
// one, which gets its device (the plugin's mount) and is listed with it by the PodResources API;
// a pod asking for more than is left is refused with the kubelet's reason; and an agent restart
// keeps the allocation while the plugin registers again.
func TestClusterDevicePlugin(t *testing.T) {
	e := newEnv(t, onNodelet)
	client := e.joinLoopbackCluster(t)
	ctx := context.Background()
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })
	image := pushSampleDevicePlugin(t, e.reg)
	if _, err := client.CoreV1().Pods("kube-system").Create(ctx, sampleDevicePluginPod(image, devicemanager.Dir(e.cfg.RootDir)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The plugin makes its fake devices as files in its own /tmp and hands out mounts of
	// /tmp/Dev-N of the host, which the runtime makes (as containerd and CRI-O do) for the
	// consumer: folders of the host's /tmp, removed at the end.
	t.Cleanup(func() {
		os.Remove("/tmp/Dev-1")
		os.Remove("/tmp/Dev-2")
	})

	nodes := client.CoreV1().Nodes()
	devicesOnNode := func(capacity, allocatable string) func() bool {
		return func() bool {
			n, err := nodes.Get(ctx, "e2e", metav1.GetOptions{})
			if err != nil {
				return false
			}
			c, a := n.Status.Capacity[sampleResource], n.Status.Allocatable[sampleResource]
			return c.String() == capacity && a.String() == allocatable
		}
	}
	e.eventually("example.com/resource: 2 in the Node's capacity and allocatable", devicesOnNode("2", "2"))

	one := v1.ResourceList{sampleResource: resource.MustParse("1")}
	grace := int64(2)
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dev"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
				Resources: v1.ResourceRequirements{Limits: one, Requests: one}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the device pod scheduled here and running", func() bool { return podPhase(ctx, client, "dev") == v1.PodRunning })
	id := runningContainer(t, e, "dev", "app")
	files := strings.Fields(e.exec(id, "/bin/sh", "-c", "ls /tmp | grep '^Dev-' || true"))
	if len(files) != 1 {
		t.Fatalf("the container sees devices %v, want the one allocated", files)
	}

	pr := podResourcesClient(t, e.cfg.RootDir)
	var listed string
	e.eventually("the PodResources API listing the pod's device", func() bool {
		listed = listedDevices(pr, "dev", "app")
		return listed != ""
	})
	if listed != files[0] {
		t.Fatalf("PodResources lists %q, the container has %q", listed, files[0])
	}
	alloc, err := pr.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 2 {
		t.Fatalf("allocatable devices %v: %v", alloc.GetDevices(), err)
	}

	// Two more when one is left: the node refuses it as the kubelet does (bound here directly,
	// past the scheduler, which would keep it Pending).
	two := v1.ResourceList{sampleResource: resource.MustParse("2")}
	if _, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "greedy"},
		Spec: v1.PodSpec{NodeName: "e2e", TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
				Resources: v1.ResourceRequirements{Limits: two, Requests: two}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the greedy pod refused", func() bool {
		p, err := pods.Get(ctx, "greedy", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOf"+sampleResource
	})

	// The agent restarts: the pod keeps its device, and the plugin registers again (it watches
	// for kubelet.sock made anew, as it would under the kubelet).
	e.killAgent()
	e.startAgent()
	e.eventually("the plugin registered again", devicesOnNode("2", "2"))
	pr = podResourcesClient(t, e.cfg.RootDir)
	e.eventually("the device pod listed with its device after the restart", func() bool { return listedDevices(pr, "dev", "app") == files[0] })
	if again := runningContainer(t, e, "dev", "app"); again != id {
		t.Fatalf("the device pod's container was replaced across the restart: %s then %s", id, again)
	}
	// Admitted again before the plugin came back, it keeps its device: it was not refused.
	if p, err := pods.Get(ctx, "dev", metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
		t.Fatalf("the device pod after the restart: %v %s %s %s", err, p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}
