//go:build cluster

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/agent/cm/devicemanager"
	"github.com/nodelet/nodelet/agent/podresources"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

const sampleResource = "example.com/resource"

// startSampleDevicePlugin runs the upstream sample device plugin (Kubernetes' own
// test/images/sample-device-plugin, two devices of example.com/resource), unchanged. It registers
// at the hard-coded /var/lib/kubelet/device-plugins/kubelet.sock, so it runs in a mount namespace
// of its own where that folder is dir: nothing of the host's /var/lib is touched.
func startSampleDevicePlugin(t *testing.T, dir string) {
	t.Helper()
	testutil.Require(t, "unshare", "mount")
	bin := filepath.Join(kubeBinDir(), "sample-device-plugin")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: build it with hack/kube/build.sh sample-device-plugin, or set KUBE_BIN_DIR", bin)
	}
	script := `set -e
mount -t tmpfs -o size=1m,mode=0755 nodelet-e2e /var/lib
mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$1" /var/lib/kubelet/device-plugins
exec "$2"`
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", dir, bin)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
		// The plugin's fake devices are files it made in the host's /tmp.
		os.Remove("/tmp/Dev-1")
		os.Remove("/tmp/Dev-2")
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sample device plugin log:\n%s", tail(string(b), 30))
		}
	})
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

// TestClusterDevicePlugin: the upstream sample device plugin, unchanged, registers with the agent;
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
	startSampleDevicePlugin(t, devicemanager.Dir(e.cfg.RootDir))

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
}
