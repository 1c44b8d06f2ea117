package podspec

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kuberuntime"
	"github.com/nodelet/nodelet/agent/volumemanager"
	"github.com/nodelet/nodelet/test/harness/fakecri"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// recordingRuntime keeps the configs the agent sends, which are what a runtime acts on.
type recordingRuntime struct {
	runtimeapi.RuntimeServiceClient
	mu         sync.Mutex
	sandbox    *runtimeapi.PodSandboxConfig
	containers map[string]*runtimeapi.ContainerConfig
}

func (r *recordingRuntime) RunPodSandbox(ctx context.Context, in *runtimeapi.RunPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	r.mu.Lock()
	r.sandbox = in.Config
	r.mu.Unlock()
	return r.RuntimeServiceClient.RunPodSandbox(ctx, in, opts...)
}

func (r *recordingRuntime) CreateContainer(ctx context.Context, in *runtimeapi.CreateContainerRequest, opts ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	r.mu.Lock()
	r.containers[in.Config.GetMetadata().GetName()] = in.Config
	r.mu.Unlock()
	return r.RuntimeServiceClient.CreateContainer(ctx, in, opts...)
}

// synced is what one sync of a pod sent to the runtime.
type synced struct {
	err       error
	sandbox   *runtimeapi.PodSandboxConfig
	container *runtimeapi.ContainerConfig // the container named "c"
}

// syncOnce runs a pod's first sync through the runtime manager against a fake runtime, with a
// config map "cm" {k: from-cm} and a secret "sec" {k: from-secret} in its namespace.
func syncOnce(t *testing.T, pod *v1.Pod) synced {
	t.Helper()
	cri := fakecri.Start(t)
	cri.AddImage("busybox:1")
	rt := &recordingRuntime{RuntimeServiceClient: cri.Runtime(), containers: map[string]*runtimeapi.ContainerConfig{}}
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch host.example\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dns, err := kuberuntime.NewDNSConfigurer([]string{"10.96.0.10"}, "cluster.local", resolv)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "cm"}, Data: map[string]string{"k": "from-cm"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "sec"}, Data: map[string][]byte{"k": []byte("from-secret")}},
	)
	// The volume manager only locates volumes here: none is prepared, none is mounted.
	vm := &volumemanager.Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	m := kuberuntime.NewManager(kuberuntime.Deps{
		Runtime: rt, Images: cri.Images(), RootDir: t.TempDir(), PodLogsDir: t.TempDir(),
		NodeName: "node1", NodeIPs: []string{"192.0.2.1"}, DNS: dns, EnvData: vm, Volumes: vm,
	})
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	err = m.SyncPod(ctx, pod, st)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return synced{err: err, sandbox: rt.sandbox, container: rt.containers["c"]}
}

func basePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst,
			Containers: []v1.Container{{Name: "c", Image: "busybox:1"}}},
	}
}

func ptr[T any](v T) *T { return &v }

// Each case sets one pod field and checks the sandbox config RunPodSandbox got.
func TestSandboxConfigFromPodFields(t *testing.T) {
	for name, tc := range map[string]struct {
		set   func(*v1.Pod)
		check func(*runtimeapi.PodSandboxConfig) bool
	}{
		"labels": {func(p *v1.Pod) { p.Labels = map[string]string{"app": "x"} },
			func(s *runtimeapi.PodSandboxConfig) bool { return s.Labels["app"] == "x" }},
		"annotations": {func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/ingress-bandwidth": "1M"} },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return s.Annotations["kubernetes.io/ingress-bandwidth"] == "1M"
			}},
		"dnsPolicy ClusterFirst": {func(p *v1.Pod) {},
			func(s *runtimeapi.PodSandboxConfig) bool {
				d := s.DnsConfig
				return slices.Equal(d.Servers, []string{"10.96.0.10"}) && d.Searches[0] == "ns.svc.cluster.local" && slices.Contains(d.Options, "ndots:5")
			}},
		"dnsPolicy Default": {func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return slices.Equal(s.DnsConfig.Servers, []string{"192.0.2.53"}) && slices.Equal(s.DnsConfig.Searches, []string{"host.example"})
			}},
		"dnsPolicy ClusterFirst on the host network": {func(p *v1.Pod) { p.Spec.HostNetwork = true },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return slices.Equal(s.DnsConfig.Servers, []string{"192.0.2.53"})
			}},
		"dnsPolicy ClusterFirstWithHostNet": {func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.DNSPolicy = true, v1.DNSClusterFirstWithHostNet },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return slices.Equal(s.DnsConfig.Servers, []string{"10.96.0.10"})
			}},
		"dnsPolicy None and dnsConfig": {func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"a.example"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}, {Name: "rotate"}}}
		}, func(s *runtimeapi.PodSandboxConfig) bool {
			d := s.DnsConfig
			return slices.Equal(d.Servers, []string{"198.51.100.1"}) && slices.Equal(d.Searches, []string{"a.example"}) &&
				slices.Equal(d.Options, []string{"ndots:2", "rotate"})
		}},
		"dnsConfig after ClusterFirst": {func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"198.51.100.1"}} },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return slices.Equal(s.DnsConfig.Servers, []string{"10.96.0.10", "198.51.100.1"})
			}},
		"hostname": {func(p *v1.Pod) { p.Spec.Hostname = "h1" },
			func(s *runtimeapi.PodSandboxConfig) bool { return s.Hostname == "h1" }},
		"hostNetwork": {func(p *v1.Pod) { p.Spec.HostNetwork = true },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return s.Hostname == "" && s.Linux.SecurityContext.NamespaceOptions.Network == runtimeapi.NamespaceMode_NODE
			}},
		"hostPID": {func(p *v1.Pod) { p.Spec.HostPID = true },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return s.Linux.SecurityContext.NamespaceOptions.Pid == runtimeapi.NamespaceMode_NODE
			}},
		"hostIPC": {func(p *v1.Pod) { p.Spec.HostIPC = true },
			func(s *runtimeapi.PodSandboxConfig) bool {
				return s.Linux.SecurityContext.NamespaceOptions.Ipc == runtimeapi.NamespaceMode_NODE
			}},
		"sysctls": {func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}}
		}, func(s *runtimeapi.PodSandboxConfig) bool {
			return s.Linux.Sysctls["net.ipv4.ip_unprivileged_port_start"] == "0"
		}},
		"pod user, group and groups": {func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)),
				SupplementalGroups: []int64{3000}}
		}, func(s *runtimeapi.PodSandboxConfig) bool {
			sc := s.Linux.SecurityContext
			return sc.GetRunAsUser().GetValue() == 1000 && sc.GetRunAsGroup().GetValue() == 2000 && slices.Equal(sc.SupplementalGroups, []int64{3000})
		}},
		"seccomp RuntimeDefault": {func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}, func(s *runtimeapi.PodSandboxConfig) bool {
			return s.Linux.SecurityContext.GetSeccomp().GetProfileType() == runtimeapi.SecurityProfile_RuntimeDefault
		}},
		"privileged container": {func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr(true)} },
			func(s *runtimeapi.PodSandboxConfig) bool { return s.Linux.SecurityContext.Privileged }},
		"ports": {func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1", Protocol: v1.ProtocolUDP}}
		}, func(s *runtimeapi.PodSandboxConfig) bool {
			return len(s.PortMappings) == 1 && s.PortMappings[0].ContainerPort == 53 && s.PortMappings[0].HostPort == 5353 &&
				s.PortMappings[0].HostIp == "127.0.0.1" && s.PortMappings[0].Protocol == runtimeapi.Protocol_UDP
		}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := basePod()
			tc.set(pod)
			got := syncOnce(t, pod)
			if got.err != nil || got.sandbox == nil {
				t.Fatalf("sync: %v (sandbox %v)", got.err, got.sandbox)
			}
			if !tc.check(got.sandbox) {
				t.Errorf("sandbox config %v", got.sandbox)
			}
		})
	}
}

func env(c *runtimeapi.ContainerConfig) map[string]string {
	out := map[string]string{}
	for _, kv := range c.GetEnvs() {
		out[kv.Key] = string(kv.Value)
	}
	return out
}

func mountAt(c *runtimeapi.ContainerConfig, path string) *runtimeapi.Mount {
	for _, m := range c.GetMounts() {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

func fieldEnv(name, path string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
}

// Each case sets container or pod fields and checks the config CreateContainer got for "c".
func TestContainerConfigFromContainerFields(t *testing.T) {
	cm := v1.LocalObjectReference{Name: "cm"}
	sec := v1.LocalObjectReference{Name: "sec"}
	none := v1.LocalObjectReference{Name: "absent"}
	for name, tc := range map[string]struct {
		set   func(*v1.Pod, *v1.Container)
		check func(*runtimeapi.ContainerConfig) bool
	}{
		"args": {func(_ *v1.Pod, c *v1.Container) {
			c.Env, c.Args = []v1.EnvVar{{Name: "A", Value: "1"}}, []string{"x$(A)", "$$(A)"}
		}, func(c *runtimeapi.ContainerConfig) bool { return slices.Equal(c.Args, []string{"x1", "$(A)"}) }},
		"workingDir": {func(_ *v1.Pod, c *v1.Container) { c.WorkingDir = "/work" },
			func(c *runtimeapi.ContainerConfig) bool { return c.WorkingDir == "/work" }},
		"stdin, stdinOnce, tty": {func(_ *v1.Pod, c *v1.Container) { c.Stdin, c.StdinOnce, c.TTY = true, true, true },
			func(c *runtimeapi.ContainerConfig) bool { return c.Stdin && c.StdinOnce && c.Tty }},
		"fieldRef": {func(p *v1.Pod, c *v1.Container) {
			p.Labels, p.Annotations, p.Spec.ServiceAccountName = map[string]string{"l": "lv"}, map[string]string{"a": "av"}, "robot"
			c.Env = []v1.EnvVar{fieldEnv("NS", "metadata.namespace"), fieldEnv("UID", "metadata.uid"),
				fieldEnv("L", "metadata.labels['l']"), fieldEnv("A", "metadata.annotations['a']"), fieldEnv("NODE", "spec.nodeName"),
				fieldEnv("SA", "spec.serviceAccountName"), fieldEnv("HOST", "status.hostIP"), fieldEnv("IP", "status.podIP")}
		}, func(c *runtimeapi.ContainerConfig) bool {
			e := env(c)
			return e["NS"] == "ns" && e["UID"] == "uid-1" && e["L"] == "lv" && e["A"] == "av" && e["NODE"] == "node1" &&
				e["SA"] == "robot" && e["HOST"] == "192.0.2.1" && strings.HasPrefix(e["IP"], "10.88.0.")
		}},
		"configMapKeyRef and secretKeyRef": {func(_ *v1.Pod, c *v1.Container) {
			c.Env = []v1.EnvVar{
				{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: cm, Key: "k"}}},
				{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: sec, Key: "k"}}}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			e := env(c)
			return e["C"] == "from-cm" && e["S"] == "from-secret"
		}},
		"optional references left out": {func(_ *v1.Pod, c *v1.Container) {
			c.Env = []v1.EnvVar{
				{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: none, Key: "k", Optional: ptr(true)}}},
				{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: sec, Key: "nokey", Optional: ptr(true)}}},
				{Name: "KEEP", Value: "1"}}
			c.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: none, Optional: ptr(true)}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: none, Optional: ptr(true)}}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			e := env(c)
			_, hasC := e["C"]
			_, hasS := e["S"]
			return !hasC && !hasS && e["KEEP"] == "1"
		}},
		"volumeMounts readOnly and mountPropagation": {func(p *v1.Pod, c *v1.Container) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			c.VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/ro", ReadOnly: true},
				{Name: "v", MountPath: "/h2c", MountPropagation: ptr(v1.MountPropagationHostToContainer)},
				{Name: "v", MountPath: "/bi", MountPropagation: ptr(v1.MountPropagationBidirectional)}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			return mountAt(c, "/ro").GetReadonly() && !mountAt(c, "/h2c").GetReadonly() &&
				mountAt(c, "/h2c").GetPropagation() == runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER &&
				mountAt(c, "/bi").GetPropagation() == runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
		}},
		"resources": {func(_ *v1.Pod, c *v1.Container) {
			c.Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			r := c.Linux.Resources
			return r.CpuShares == 256 && r.CpuQuota == 50000 && r.CpuPeriod == 100000 && r.MemoryLimitInBytes == 64<<20
		}},
		"pod security context": {func(p *v1.Pod, _ *v1.Container) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)),
				SupplementalGroups: []int64{3000}, FSGroup: ptr(int64(4000)),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			sc := c.Linux.SecurityContext
			return sc.GetRunAsUser().GetValue() == 1000 && sc.GetRunAsGroup().GetValue() == 2000 &&
				slices.Equal(sc.SupplementalGroups, []int64{3000, 4000}) && sc.GetSeccomp().GetProfileType() == runtimeapi.SecurityProfile_RuntimeDefault
		}},
		"container security context over the pod's": {func(p *v1.Pod, c *v1.Container) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000))}
			c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(1001)), RunAsGroup: ptr(int64(2001)),
				AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
				Capabilities:   &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}, func(c *runtimeapi.ContainerConfig) bool {
			sc := c.Linux.SecurityContext
			return sc.GetRunAsUser().GetValue() == 1001 && sc.GetRunAsGroup().GetValue() == 2001 && sc.NoNewPrivs && sc.ReadonlyRootfs &&
				slices.Equal(sc.GetCapabilities().GetAddCapabilities(), []string{"NET_ADMIN"}) &&
				slices.Equal(sc.GetCapabilities().GetDropCapabilities(), []string{"ALL"}) &&
				sc.GetSeccomp().GetProfileType() == runtimeapi.SecurityProfile_RuntimeDefault && !sc.Privileged && len(sc.MaskedPaths) > 0
		}},
		"privileged": {func(_ *v1.Pod, c *v1.Container) { c.SecurityContext = &v1.SecurityContext{Privileged: ptr(true)} },
			func(c *runtimeapi.ContainerConfig) bool {
				sc := c.Linux.SecurityContext
				// The masked and read-only paths are sent as the kubelet sends them; the runtime
				// leaves a privileged container's /proc and /sys whole (runtime/oci setPaths).
				return sc.Privileged
			}},
		"hostPID and hostIPC": {func(p *v1.Pod, _ *v1.Container) { p.Spec.HostPID, p.Spec.HostIPC = true, true },
			func(c *runtimeapi.ContainerConfig) bool {
				ns := c.Linux.SecurityContext.NamespaceOptions
				return ns.Pid == runtimeapi.NamespaceMode_NODE && ns.Ipc == runtimeapi.NamespaceMode_NODE
			}},
		"shareProcessNamespace": {func(p *v1.Pod, _ *v1.Container) { p.Spec.ShareProcessNamespace = ptr(true) },
			func(c *runtimeapi.ContainerConfig) bool {
				return c.Linux.SecurityContext.NamespaceOptions.Pid == runtimeapi.NamespaceMode_POD
			}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := basePod()
			tc.set(pod, &pod.Spec.Containers[0])
			got := syncOnce(t, pod)
			if got.err != nil || got.container == nil {
				t.Fatalf("sync: %v (container %v)", got.err, got.container)
			}
			if !tc.check(got.container) {
				t.Errorf("container config %v", got.container)
			}
		})
	}
}

// A fileKeyRef is refused with the error the status shows, and nothing is created.
func TestFileKeyRefIsRefused(t *testing.T) {
	pod := basePod()
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "F", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
		VolumeName: "v", Path: "f", Key: "k"}}}}
	got := syncOnce(t, pod)
	if got.err == nil || !strings.Contains(got.err.Error(), "env F: valueFrom.fileKeyRef is not supported") ||
		strings.Count(got.err.Error(), "env F:") != 1 || got.container != nil {
		t.Fatalf("sync: %v, container %v", got.err, got.container)
	}
}
