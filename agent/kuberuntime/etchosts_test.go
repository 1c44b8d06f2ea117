package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func hostsMountOf(t *testing.T, cfg *runtimeapi.ContainerConfig) (string, bool) {
	t.Helper()
	for _, m := range cfg.Mounts {
		if m.ContainerPath == "/etc/hosts" {
			b, err := os.ReadFile(m.HostPath)
			if err != nil {
				t.Fatal(err)
			}
			if m.Readonly {
				t.Errorf("hosts mount read-only")
			}
			return string(b), true
		}
	}
	return "", false
}

func TestEtcHostsManaged(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Hostname, pod.Spec.Subdomain = "host-1", "sub"
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "10.1.1.1", Hostnames: []string{"baz\n6.6.6.6 evil"}}}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", []string{"10.0.0.2", "fd00::2"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := hostsMountOf(t, cfg)
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.0.0.2\thost-1.sub.default.svc.cluster.local\thost-1\n" +
		"fd00::2\thost-1.sub.default.svc.cluster.local\thost-1\n" +
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n10.1.1.1\t\n"
	if !ok || got != want {
		t.Fatalf("hosts file:\n%s\nwant:\n%s", got, want)
	}
	p := filepath.Join(f.m.RootDir, "pods", string(pod.UID), "etc-hosts")
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("%s: %v %v", p, fi, err)
	}

	// No sandbox IP yet: nothing to say.
	cfg, err = f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", nil)
	if _, ok := hostsMountOf(t, cfg); err != nil || ok {
		t.Fatalf("mounted without pod IPs (%v)", err)
	}
	// The container's own /etc/hosts wins.
	pod.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts/"}}
	cfg, err = f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", []string{"10.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range cfg.Mounts {
		if filepath.Clean(m.ContainerPath) == "/etc/hosts" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d mounts at /etc/hosts, want the container's own only", n)
	}
}

func TestEtcHostsPlainHostname(t *testing.T) {
	got := string(managedHostsContent([]string{"10.0.0.2"}, "web", "", nil))
	if want := "10.0.0.2\tweb\n"; got[len(got)-len(want):] != want {
		t.Fatalf("hosts %q", got)
	}
}

func TestEtcHostsHostNetwork(t *testing.T) {
	f := newFixture(t)
	node := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(node, []byte("127.0.0.1 localhost\n192.168.1.1 node1"), 0o644)
	old := nodeHostsFile
	nodeHostsFile = node
	t.Cleanup(func() { nodeHostsFile = old })
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"x"}}}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := hostsMountOf(t, cfg)
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.1.1 node1\n\n# Entries added by HostAliases.\n1.2.3.4\tx\n"
	if !ok || got != want {
		t.Fatalf("hosts %q, want %q", got, want)
	}
	// A FIFO in place of the node's file never blocks the sync.
	os.Remove(node)
	if err := mkfifo(node); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", nil); err == nil {
		t.Fatal("a FIFO accepted as the node's hosts file")
	}
}

func TestEtcHostsRewrittenAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "etc-hosts")
	if err := writeFileAtomic(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi1, _ := os.Stat(p)
	if err := writeFileAtomic(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(p)
	if !os.SameFile(fi1, fi2) {
		t.Error("unchanged file replaced")
	}
	os.WriteFile(p, []byte("changed by a container\n"), 0)
	if err := writeFileAtomic(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "a\n" {
		t.Fatalf("content %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
