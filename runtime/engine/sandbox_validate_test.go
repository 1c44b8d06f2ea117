package engine

import (
	"errors"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func TestSandboxValidateConfig(t *testing.T) {
	base := func() *runtimeapi.PodSandboxConfig {
		return &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "0b7d-11"},
			Hostname: "web",
			Linux:    &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{}}},
		}
	}
	hostNet := func(c *runtimeapi.PodSandboxConfig) {
		c.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	}
	hostIPC := func(c *runtimeapi.PodSandboxConfig) {
		c.Linux.SecurityContext.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
	}
	sysctls := func(kv ...string) func(*runtimeapi.PodSandboxConfig) {
		return func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				c.Linux.Sysctls[kv[i]] = kv[i+1]
			}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate []func(*runtimeapi.PodSandboxConfig)
		ok     bool
	}{
		{"valid", nil, true},
		{"no config", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { *c = runtimeapi.PodSandboxConfig{} }}, false},
		{"no name", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "" }}, false},
		{"no namespace", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Namespace = "" }}, false},
		{"no uid", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Uid = "" }}, false},
		{"slash in name", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "a/b" }}, false},
		{"dotdot namespace", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Namespace = ".." }}, false},
		{"dotdot in uid", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Uid = "x..y" }}, false},
		{"newline in name", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "a\nb" }}, false},
		{"huge name", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = string(make([]byte, 300)) }}, false},
		{"bad hostname", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "a b" }}, false},
		{"64-character hostname", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Hostname = strings.Repeat("h", 64) }}, true},
		{"65-character hostname", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Hostname = strings.Repeat("h", 65) }}, false},
		{"huge annotations", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.Annotations = map[string]string{"a": string(make([]byte, 300<<10))}
		}}, false},
		{"relative cgroup parent", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "kubepods" }}, false},
		{"dotdot cgroup parent", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "/kubepods/../x" }}, false},
		{"systemd cgroup parent", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "kubepods.slice" }}, false},
		{"cgroupfs parent", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "/kubepods/burstable/pod1" }}, true},
		{"dns", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "fd00::a"}, Searches: []string{"svc.cluster.local"}, Options: []string{"ndots:5"}}
		}}, true},
		{"dns server not an IP", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10\nnameserver 6.6.6.6"}}
		}}, false},
		{"dns search injects a line", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Searches: []string{"a\nnameserver 6.6.6.6"}}
		}}, false},
		{"too many dns servers", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}}
		}}, false},
		{"namespaced sysctls", []func(*runtimeapi.PodSandboxConfig){sysctls("net.ipv4.ip_forward", "1", "kernel.shm_rmid_forced", "1", "kernel.sem", "250 32000 32 128", "fs.mqueue.msg_max", "20", "kernel.msgmax", "9000", "net.ipv4.conf.eth0/100.rp_filter", "1")}, true},
		{"sysctl injection in key", []func(*runtimeapi.PodSandboxConfig){sysctls("kernel.shm_rmid_forced=1+kernel.core_pattern", "x")}, false},
		{"sysctl injection in value", []func(*runtimeapi.PodSandboxConfig){sysctls("kernel.shm_rmid_forced", "1+kernel.core_pattern=x")}, false},
		{"sysctl newline in value", []func(*runtimeapi.PodSandboxConfig){sysctls("kernel.shm_rmid_forced", "1\nkernel.core_pattern=x")}, false},
		{"node-wide sysctl", []func(*runtimeapi.PodSandboxConfig){sysctls("kernel.core_pattern", "|/tmp/x")}, false},
		{"kernel.shm prefix trick", []func(*runtimeapi.PodSandboxConfig){sysctls("kernel.shm/../../core_pattern", "x")}, false},
		{"sysctl path traversal", []func(*runtimeapi.PodSandboxConfig){sysctls("net.ipv4..x", "1")}, false},
		{"net sysctl with host network", []func(*runtimeapi.PodSandboxConfig){hostNet, sysctls("net.ipv4.ip_forward", "1")}, false},
		{"ipc sysctl with host network", []func(*runtimeapi.PodSandboxConfig){hostNet, sysctls("kernel.shmmni", "4096")}, true},
		{"ipc sysctl with host ipc", []func(*runtimeapi.PodSandboxConfig){hostIPC, sysctls("kernel.shmmni", "4096")}, false},
		{"mqueue sysctl with host ipc", []func(*runtimeapi.PodSandboxConfig){hostIPC, sysctls("fs.mqueue.msg_max", "20")}, false},
		{"user namespace", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
		}}, false},
		{"pid target", []func(*runtimeapi.PodSandboxConfig){func(c *runtimeapi.PodSandboxConfig) {
			c.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			for _, m := range tc.mutate {
				m(c)
			}
			err := validateSandboxConfig(c)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("want InvalidArgument, got %v", err)
			}
		})
	}
}

func TestSandboxResolvConf(t *testing.T) {
	got, err := resolvConf(&runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"a.svc", "svc"}, Options: []string{"ndots:5"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "search a.svc svc\nnameserver 10.0.0.10\noptions ndots:5\n"
	if string(got) != want {
		t.Errorf("resolv.conf = %q, want %q", got, want)
	}
}

func TestSandboxLabelsMatch(t *testing.T) {
	l := map[string]string{"app": "web", "tier": "fe"}
	for _, tc := range []struct {
		sel  map[string]string
		want bool
	}{{nil, true}, {map[string]string{"app": "web"}, true}, {map[string]string{"app": "db"}, false}, {map[string]string{"x": ""}, false}} {
		if got := labelsMatch(l, tc.sel); got != tc.want {
			t.Errorf("labelsMatch(%v) = %v", tc.sel, got)
		}
	}
}
