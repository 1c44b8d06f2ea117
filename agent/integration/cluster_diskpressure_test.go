//go:build cluster

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

func TestClusterDiskPressureOnNodeletRuntime(t *testing.T) { diskPressureScenario(t, onNodelet) }
func TestClusterDiskPressureOnContainerd(t *testing.T)     { diskPressureScenario(t, onContainerd) }

// loopFS mounts a new 1 GiB ext4 filesystem (a sparse file: only what is written takes disk) of the test's own and returns its mount point; it is
// unmounted (and its loop device released) after every other cleanup of the test.
func loopFS(t *testing.T) string {
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v (apt-get install e2fsprogs mount)", tool, err)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(1 << 30)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// The runtime's processes (conmon, the containers' last reaped children) may still be
		// letting go of the filesystem when the runtime's own cleanup returns.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := exec.Command("umount", mnt).CombinedOutput()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("umount %s: %v: %s; holding it: %v", mnt, err, out, holders(mnt))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return mnt
}

func freeBytes(t testing.TB, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// diskPressureScenario stages disk pressure on a loop-mounted filesystem holding the runtime's
// images and the agent's root: nodefs.available (and imagefs.available, the same filesystem) is set
// 40Mi below what is free at the start. An unused image is collected first; a BestEffort pod
// writing 64Mi into its emptyDir is then evicted (Failed, Evicted, the kubelet's message), its
// emptyDir given back, a small pod keeps running, and DiskPressure turns True and back after the
// transition period.
func diskPressureScenario(t *testing.T, start func(t testing.TB, dir, reg string) *criRuntime) {
	mnt := loopFS(t)
	e := newEnvIn(t, filepath.Join(mnt, "env"), start)
	client := e.joinLoopbackCluster(t)
	threshold := strconv.FormatInt(freeBytes(t, mnt)-40<<20, 10)
	e.cfg.Kubelet.EvictionHard = map[string]string{"nodefs.available": threshold, "imagefs.available": threshold}
	e.cfg.EvictionMonitoringInterval = time.Second
	e.cfg.Kubelet.EvictionPressureTransitionPeriod.Duration = 5 * time.Second
	e.cfg.Kubelet.ImageMinimumGCAge.Duration = 0
	if err := agentconfig.Complete(&e.cfg); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	ctx := context.Background()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })

	wait := "trap 'exit 0' TERM; while true; do sleep 1; done"
	pod := func(name, image, script string, vols []v1.Volume, mounts []v1.VolumeMount, res v1.ResourceList, restart v1.RestartPolicy) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, RestartPolicy: restart, Volumes: vols,
				TerminationGracePeriodSeconds: new(int64),
				Containers: []v1.Container{{Name: "c", Image: image, Command: []string{"/bin/sh", "-c", script}, VolumeMounts: mounts,
					Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
	}
	create := func(p *v1.Pod) {
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An image that nothing uses any more: the node-level reclaim takes it before any pod goes.
	// (Its own config, so its own image ID: busybox:1 and :2 are one image under two names.)
	old := e.reg + "/busybox:old"
	pushBusybox(t, crirt.BusyboxLayer(t), old, "/bin/true")
	create(pod("old", old, "true", nil, nil, nil, v1.RestartPolicyNever))
	e.eventually("the pod of the old image done", func() bool { return podPhase(ctx, client, "old") == v1.PodSucceeded })
	zero := int64(0)
	client.CoreV1().Pods("default").Delete(ctx, "old", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	e.eventually("the old image's pod gone from the runtime", func() bool { return len(e.sandboxes("old")) == 0 })
	images := runtimeapi.NewImageServiceClient(e.rt.Conn)
	hasImage := func(ref string) bool {
		resp, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		return err == nil && resp.Image != nil
	}
	if !hasImage(old) {
		t.Fatalf("%s not on the node before the pressure", old)
	}

	small := resource.MustParse("16Mi")
	create(pod("small", e.reg+"/busybox:1", wait, nil, nil, v1.ResourceList{v1.ResourceMemory: small, v1.ResourceCPU: resource.MustParse("10m")}, v1.RestartPolicyAlways))
	e.eventually("the small pod running", func() bool { return podPhase(ctx, client, "small") == v1.PodRunning })
	if c := nodeCondition(ctx, client, v1.NodeDiskPressure); c != v1.ConditionFalse {
		t.Fatalf("DiskPressure %q before any pressure, want False", c)
	}
	create(pod("writer", e.reg+"/busybox:1", "dd if=/dev/zero of=/data/fill bs=1048576 count=64; "+wait,
		[]v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		[]v1.VolumeMount{{Name: "data", MountPath: "/data"}}, nil, v1.RestartPolicyAlways))

	sawPressure := false
	e.eventually("the writing pod evicted", func() bool {
		sawPressure = sawPressure || nodeCondition(ctx, client, v1.NodeDiskPressure) == v1.ConditionTrue
		return podPhase(ctx, client, "writer") == v1.PodFailed
	})
	p, _ := client.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
	if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "The node was low on resource: ephemeral-storage") {
		t.Errorf("evicted pod's status: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if hasImage(old) {
		t.Errorf("the unused image %s is still there: node-level reclaim did not run before the eviction", old)
	}
	// The evicted pod's emptyDir goes with its containers, so the pressure ends; the condition
	// stays for the transition period, then goes.
	e.eventually("DiskPressure reported, then gone after the transition period", func() bool {
		c := nodeCondition(ctx, client, v1.NodeDiskPressure)
		sawPressure = sawPressure || c == v1.ConditionTrue
		return sawPressure && c == v1.ConditionFalse
	})
	if ph := podPhase(ctx, client, "small"); ph != v1.PodRunning {
		t.Errorf("the small pod is %s, want Running: only the writing pod should go", ph)
	}
	expectEvents(t, ctx, client, "Evicted/writer", "EvictionThresholdMet/e2e", "NodeHasDiskPressure/e2e")
	for _, name := range []string{"small", "writer"} {
		client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	e.eventually("pods gone from the runtime", func() bool { return len(e.allSandboxes()) == 0 })
}

// holders names the processes with a working directory, root or open file below dir, to tell
// what keeps a filesystem busy.
func holders(dir string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		base := filepath.Join("/proc", p.Name())
		links := []string{filepath.Join(base, "cwd"), filepath.Join(base, "root")}
		if fds, err := os.ReadDir(filepath.Join(base, "fd")); err == nil {
			for _, fd := range fds {
				links = append(links, filepath.Join(base, "fd", fd.Name()))
			}
		}
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir) {
				comm, _ := os.ReadFile(filepath.Join(base, "comm"))
				out = append(out, p.Name()+" "+strings.TrimSpace(string(comm))+" "+filepath.Base(l)+" -> "+target)
				break
			}
		}
	}
	return out
}
