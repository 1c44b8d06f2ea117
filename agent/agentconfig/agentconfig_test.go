package agentconfig

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/spf13/pflag"

	"github.com/nodelet/nodelet/agent/internal/sysctl"
)

func configOf(t *testing.T, file string, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := AddFlags(fs)
	if file != "" {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config="+p)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return f.Config()
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestConfigFileAndFlags(t *testing.T) {
	cfg, err := configOf(t, header+"staticPodPath: /etc/kubernetes/manifests\nmaxPods: 20\nsyncFrequency: 30s\nclusterDNS: [10.96.0.10]\nfailSwapOn: false\n",
		"--max-pods=7", "--hostname-override=Node-A", "--node-ip=192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kubelet.StaticPodPath != "/etc/kubernetes/manifests" || cfg.Kubelet.SyncFrequency.Duration != 30*time.Second || len(cfg.Kubelet.ClusterDNS) != 1 {
		t.Errorf("file not applied: %+v", cfg)
	}
	if cfg.Kubelet.MaxPods != 7 {
		t.Errorf("flag did not override the file: max pods %d", cfg.Kubelet.MaxPods)
	}
	if cfg.NodeName != "node-a" || cfg.NodeIPs[0] != "192.0.2.1" {
		t.Errorf("node %q %v", cfg.NodeName, cfg.NodeIPs)
	}
	if cfg.Kubelet.ContainerRuntimeEndpoint != DefaultRuntimeEndpoint || cfg.RootDir != DefaultRootDir {
		t.Errorf("defaults %+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		args []string
		want string
	}{
		"unknown field":  {header + "staticPodPaht: /x\n", nil, "unknown field"},
		"wrong kind":     {"apiVersion: v1\nkind: Pod\n", nil, "want KubeletConfiguration"},
		"systemd driver": {header + "cgroupDriver: systemd\n", nil, "cgroupfs"},
		"bad type":       {header + "maxPods: many\n", nil, "maxPods"},
		"bad node ip":    {"", []string{"--node-ip=node.example"}, "not an IP"},
		"bad endpoint":   {"", []string{"--container-runtime-endpoint=tcp://x"}, "unix://"},
		"zero max pods":  {"", []string{"--max-pods=0"}, "max pods"},
		"k8s label":      {"", []string{"--node-labels=node-role.kubernetes.io/master="}, "kubernetes.io"},
		"bad label":      {"", []string{"--node-labels=a b=c"}, "node label"},
		"taint effect":   {"", []string{"--register-with-taints=a=b:Sometimes"}, "effect"},
		"taint spelling": {"", []string{"--register-with-taints=a=b"}, "key=value:Effect"},
		"file taint":     {header + "registerWithTaints: [{key: a, effect: Never}]\n", nil, "effect"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := configOf(t, tc.file, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNodeLabelsAndTaints(t *testing.T) {
	cfg, err := configOf(t, header+"registerWithTaints: [{key: dedicated, value: edge, effect: NoExecute}]\n",
		"--node-labels=node.kubernetes.io/exclude-from-external-load-balancers=,example.com/rack=r1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeLabels["example.com/rack"] != "r1" || len(cfg.NodeLabels) != 2 {
		t.Fatalf("labels %v", cfg.NodeLabels)
	}
	if len(cfg.Kubelet.RegisterWithTaints) != 1 || cfg.Kubelet.RegisterWithTaints[0].Effect != v1.TaintEffectNoExecute {
		t.Fatalf("taints from the file %v", cfg.Kubelet.RegisterWithTaints)
	}
	cfg, err = configOf(t, "", "--register-with-taints=a=b:NoSchedule,c:PreferNoSchedule")
	if err != nil || len(cfg.Kubelet.RegisterWithTaints) != 2 || cfg.Kubelet.RegisterWithTaints[1].Key != "c" || cfg.Kubelet.RegisterWithTaints[1].Value != "" {
		t.Fatalf("taints from the flag %v %v", cfg.Kubelet.RegisterWithTaints, err)
	}
}

func TestDetectNodeIPIsNeverLoopback(t *testing.T) {
	if ip := detectNodeIP(); ip != "" {
		p := net.ParseIP(ip)
		if p == nil || p.IsLoopback() || p.To4() == nil {
			t.Fatalf("detected %q", ip)
		}
	}
}

func TestImageAndContainerGCSettings(t *testing.T) {
	cfg, err := configOf(t, header+"serializeImagePulls: false\nmaxParallelImagePulls: 3\nimageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 5m\n",
		"--maximum-dead-containers-per-container=2", "--image-gc-low-threshold=40")
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Kubelet.SerializeImagePulls || *cfg.Kubelet.MaxParallelImagePulls != 3 || *cfg.Kubelet.ImageGCHighThresholdPercent != 70 ||
		*cfg.Kubelet.ImageGCLowThresholdPercent != 40 || cfg.Kubelet.ImageMinimumGCAge.Duration != 5*time.Minute || cfg.MaxPerPodContainer != 2 || cfg.MaxContainers != -1 {
		t.Fatalf("config %+v", cfg)
	}
	d := Default().Kubelet
	if !*d.SerializeImagePulls || *d.ImageGCHighThresholdPercent != 85 || *d.ImageGCLowThresholdPercent != 80 || d.ImageMinimumGCAge.Duration != 2*time.Minute {
		t.Fatalf("defaults %+v", d)
	}
	for _, bad := range []string{"maxParallelImagePulls: 3\n", "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n", "imageGCHighThresholdPercent: 101\n"} {
		if _, err := configOf(t, header+bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestAllowedUnsafeSysctls(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		args    []string
		want    []string
		wantErr bool
	}{
		{name: "none", want: nil},
		{name: "file", file: header + "allowedUnsafeSysctls: [\"kernel.msg*\", net.core.somaxconn]\n", want: []string{"kernel.msg*", "net.core.somaxconn"}},
		{name: "flag wins", file: header + "allowedUnsafeSysctls: [\"kernel.msg*\"]\n", args: []string{"--allowed-unsafe-sysctls=net.*"}, want: []string{"net.*"}},
		{name: "not namespaced", args: []string{"--allowed-unsafe-sysctls=kernel.panic"}, wantErr: true},
		{name: "malformed", file: header + "allowedUnsafeSysctls: [\"*\"]\n", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := configOf(t, c.file, c.args...)
			if c.wantErr {
				if !errors.Is(err, sysctl.ErrInvalidPattern) {
					t.Fatalf("err %v, want ErrInvalidPattern", err)
				}
				return
			}
			if err != nil || !slices.Equal(cfg.Kubelet.AllowedUnsafeSysctls, c.want) {
				t.Fatalf("got %q, %v; want %q", cfg.Kubelet.AllowedUnsafeSysctls, err, c.want)
			}
		})
	}
}
