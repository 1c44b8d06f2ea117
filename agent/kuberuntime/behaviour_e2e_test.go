package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// e2ePod runs pod on the real runtime through m: syncs until done(status) holds, and kills and
// removes it at cleanup.
func e2ePod(t *testing.T, m *Manager, pod *v1.Pod, what string, done func(*kubecontainer.PodStatus) bool) *kubecontainer.PodStatus {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if done(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: containers %v", what, st.ContainerStatuses)
		}
		if err := m.SyncPod(ctx, pod, st); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
}

func exitedWith(name string, st *kubecontainer.PodStatus) *kubecontainer.Status {
	if cs := st.FindContainerStatusByName(name); cs != nil && cs.State == kubecontainer.StateExited {
		return cs
	}
	return nil
}

// TestSidecarStopsAfterTheAppOnTheRealRuntime: the app takes 2s to stop after its SIGTERM; the
// sidecar, told to stop only once the app has, finds the file the app wrote on its way out.
func TestSidecarStopsAfterTheAppOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:sidecar", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	pod := orderPod([]string{"side-proxy"}, "app")
	pod.UID = "uid-e2e-sidecar"
	pod.Spec.HostNetwork = true
	pod.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	mount := []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	side := &pod.Spec.InitContainers[0]
	side.Image, side.VolumeMounts, side.TerminationMessagePath = image, mount, "/dev/termination-log"
	side.Command = []string{"sh", "-c", `trap 'if [ -e /shared/app-ended ]; then echo app ended first; else echo app still running; fi > /dev/termination-log; exit 0' TERM
touch /shared/side-up; sleep 3600 & wait $!`}
	app := &pod.Spec.Containers[0]
	app.Image, app.VolumeMounts = image, mount
	app.Command = []string{"sh", "-c", `trap 'sleep 2; touch /shared/app-ended; exit 0' TERM
touch /shared/app-up; sleep 3600 & wait $!`}

	shared, err := podpath.VolumeDir(m.RootDir, pod.UID, podpath.EmptyDirPlugin, "shared")
	if err != nil {
		t.Fatal(err)
	}
	up := func(name string) bool { _, err := os.Stat(filepath.Join(shared, name)); return err == nil }
	// Both have set their traps.
	st := e2ePod(t, m, pod, "sidecar and app running", func(*kubecontainer.PodStatus) bool { return up("side-up") && up("app-up") })

	if err := m.KillPod(context.Background(), pod, st, nil); err != nil {
		t.Fatal(err)
	}
	st, err = m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	cs := exitedWith("side-proxy", st)
	if cs == nil || cs.Message != "app ended first\n" {
		t.Fatalf("sidecar %+v: it got its SIGTERM before the app had stopped", cs)
	}
}

// TestHostnameAsFQDNOnTheRealRuntime: with setHostnameAsFQDN the container's hostname is the pod's
// FQDN, here the longest the kubelet allows (64 characters).
func TestHostnameAsFQDNOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:hostname", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir(),
		DNS: DNSConfigurer{ClusterDomain: "cluster.local"}})
	yes := true
	pod := testPod(v1.RestartPolicyNever, nil, "h")
	pod.UID = "uid-e2e-fqdn"
	pod.Namespace = strings.Repeat("n", 35) // host-1.sub.<ns>.svc.cluster.local: 64 characters
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = "host-1", "sub", &yes
	c := &pod.Spec.Containers[0]
	c.Image, c.TerminationMessagePath = image, "/dev/termination-log"
	c.Command = []string{"sh", "-c", "{ hostname; cat /proc/sys/kernel/hostname; } > /dev/termination-log"}
	st := e2ePod(t, m, pod, "hostname printed", func(st *kubecontainer.PodStatus) bool { return exitedWith("h", st) != nil })
	fqdn := "host-1.sub." + pod.Namespace + ".svc.cluster.local"
	if got := exitedWith("h", st).Message; got != fqdn+"\n"+fqdn+"\n" {
		t.Fatalf("hostname %q, want %q (%d characters)", got, fqdn, len(fqdn))
	}
}

// TestImageVolumeOnTheRealRuntime: an OCI image's files appear read-only at the volume's mount path,
// and a subPath mounts one of its folders.
func TestImageVolumeOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:imagevol", nil)
	data := rt.PushFiles(t, "data:1", map[string][]byte{"data/greeting": []byte("hello from the image\n"), "data/sub/inner": []byte("inner\n")})
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	pod := testPod(v1.RestartPolicyNever, nil, "reader")
	pod.UID = "uid-e2e-imagevol"
	pod.Spec.HostNetwork = true
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: data, PullPolicy: v1.PullIfNotPresent}}}}
	c := &pod.Spec.Containers[0]
	c.Image, c.TerminationMessagePath = image, "/dev/termination-log"
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/inner", SubPath: "data/sub"}}
	c.Command = []string{"sh", "-c", `{ cat /data/data/greeting /inner/inner; touch /data/x 2>/dev/null && echo writable; } > /dev/termination-log`}
	st := e2ePod(t, m, pod, "image volume read", func(st *kubecontainer.PodStatus) bool { return exitedWith("reader", st) != nil })
	if got := exitedWith("reader", st); got.ExitCode != 1 || got.Message != "hello from the image\ninner\n" {
		t.Fatalf("reader exited %d with %q", got.ExitCode, got.Message)
	}
}
