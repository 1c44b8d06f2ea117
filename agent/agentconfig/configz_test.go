package agentconfig

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	upstream "k8s.io/kubelet/config/v1beta1"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// richConfig sets every field the agent honours to a value other than its default.
const richConfig = header + `staticPodPath: /etc/kubernetes/manifests
staticPodURL: http://192.0.2.9/pods
staticPodURLHeader: {X-Token: [a]}
fileCheckFrequency: 30s
httpCheckFrequency: 40s
syncFrequency: 50s
enableServer: true
address: 192.0.2.1
port: 10260
tlsCertFile: /etc/nodelet/tls.crt
tlsPrivateKeyFile: /etc/nodelet/tls.key
serverTLSBootstrap: true
authentication: {x509: {clientCAFile: /etc/kubernetes/ca.crt}, webhook: {enabled: true, cacheTTL: 1m}, anonymous: {enabled: false}}
authorization: {mode: Webhook, webhook: {cacheAuthorizedTTL: 2m, cacheUnauthorizedTTL: 20s}}
healthzPort: 10249
healthzBindAddress: 127.0.0.2
registerNode: false
registerWithTaints: [{key: dedicated, value: edge, effect: NoSchedule}]
nodeStatusUpdateFrequency: 20s
nodeStatusReportFrequency: 4m
nodeLeaseDurationSeconds: 60
kubeAPIQPS: 20
kubeAPIBurst: 40
contentType: application/vnd.kubernetes.protobuf
podCIDR: 10.244.0.0/24
imageMinimumGCAge: 3m
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
serializeImagePulls: false
maxParallelImagePulls: 3
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
runtimeRequestTimeout: 3m
clusterDomain: cluster.example
clusterDNS: [10.96.0.10]
resolvConf: /run/systemd/resolve/resolv.conf
maxPods: 42
podsPerCore: 10
allowedUnsafeSysctls: [net.core.somaxconn]
seccompDefault: true
podLogsDir: /var/log/pods2
containerLogMaxSize: 20Mi
containerLogMaxFiles: 4
containerLogMonitorInterval: 20s
evictionHard: {memory.available: 200Mi}
mergeDefaultEvictionSettings: true
evictionSoft: {memory.available: 300Mi}
evictionSoftGracePeriod: {memory.available: 1m0s}
evictionMinimumReclaim: {memory.available: 50Mi}
evictionMaxPodGracePeriod: 30
evictionPressureTransitionPeriod: 2m0s
kernelMemcgNotification: true
cgroupRoot: /custom
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
systemReserved: {cpu: 100m}
kubeReserved: {memory: 100Mi}
systemReservedCgroup: /system.slice
kubeReservedCgroup: /kube.slice
enforceNodeAllocatable: [pods, system-reserved, kube-reserved]
podPidsLimit: 1024
cpuManagerPolicy: static
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
cpuManagerReconcilePeriod: 5s
reservedSystemCPUs: "0"
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
enableSystemLogHandler: false
`

// loadServing is configOf with the serving flags too, as the agent command has them.
func loadServing(t *testing.T, file string, args ...string) Config {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := AddFlags(fs)
	AddServingFlags(f)
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(append(args, "--config="+p)); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every field the agent honours is read, as a field of Config.Kubelet, somewhere in the agent's
// code, or by load into Options or Derived: an honoured field nobody reads would be a setting
// silently dropped. /configz, which copies Config.Kubelet, would not tell.
func TestEveryHonouredFieldIsRead(t *testing.T) {
	readByLoad := map[string]string{
		"apiVersion/kind":              "decodeFile checks them",
		"enableServer":                 "setServingDefaults makes false port 0; portSet makes it Derived.PortSet",
		"cgroupRoot":                   "podsCgroup makes it Options.PodsCgroup",
		"cgroupsPerQOS":                "podsCgroup makes it Options.PodsCgroup",
		"mergeDefaultEvictionSettings": "setDefaults merges evictionHard with the defaults",
		"kubeAPIQPS":                   "defaultOptions makes it Options.KubeAPIQPS",
	}
	read := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Kubelet" {
					read[sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	for name, i := range kubeletConfigIndex.Get() {
		_, byLoad := readByLoad[name]
		switch honoured, isRead := kubeletConfigFields.Get()[name].honoured, read[typ.Field(i).Name]; {
		case byLoad && (!honoured || isRead):
			t.Errorf("%s is listed as read by load, but it is read as Config.Kubelet.%s or not honoured", name, typ.Field(i).Name)
		case honoured && !byLoad && !isRead:
			t.Errorf("%s is honoured, but no code under agent/ reads Config.Kubelet.%s", name, typ.Field(i).Name)
		}
	}
}

// Every flag writes honoured fields only (or Options): checkFields, which refuses the values the
// agent does not honour, sees the file only.
func TestFlagsBindOnlyHonouredFields(t *testing.T) {
	rules := kubeletConfigFields.Get()
	for flag, fields := range flagFields(t) {
		for _, name := range fields {
			if !rules[name].honoured {
				t.Errorf("--%s writes %s, which the agent does not honour", flag, name)
			}
		}
	}
}

// flagFields finds the fields of the file format each flag writes by setting it: bindFlags is the
// registry of the flags. A flag that writes only Options maps to none; one that writes nothing fails.
func flagFields(t *testing.T) map[string][]string {
	fresh := func() (*pflag.FlagSet, *kubeletv1beta1.KubeletConfiguration, *Options) {
		var kc kubeletv1beta1.KubeletConfiguration
		setDefaults(&kc)
		setServingDefaults(&kc)
		o := defaultOptions(&kc)
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		bindFlags(fs, &kc, &o)
		bindServingFlags(fs, &kc)
		return fs, &kc, &o
	}
	all, _, _ := fresh()
	index := kubeletConfigIndex.Get()
	out := map[string][]string{}
	all.VisitAll(func(fl *pflag.Flag) {
		fs, kc, o := fresh()
		before, beforeOpts := *kc, *o
		value := map[string]string{"bool": strconv.FormatBool(fl.DefValue != "true"), "int": "7", "int32": "7", "int64": "7",
			"float32": "7.5", "duration": "7s", "string": "x-test", "stringSlice": "x-test", "stringToString": "x=test"}[fl.Value.Type()]
		switch v := fl.Value.(type) {
		case evictionMap:
			value = "memory.available" + v.op + "1Gi"
		case *taints:
			value = "x=test:NoSchedule"
		}
		if err := fs.Set(fl.Name, value); err != nil {
			t.Fatalf("--%s=%s: %v", fl.Name, value, err)
		}
		wrote := !reflect.DeepEqual(*o, beforeOpts)
		out[fl.Name] = []string{}
		vb, va := reflect.ValueOf(before), reflect.ValueOf(*kc)
		for name, i := range index {
			if !reflect.DeepEqual(vb.Field(i).Interface(), va.Field(i).Interface()) {
				wrote = true
				out[fl.Name] = append(out[fl.Name], name)
			}
		}
		if !wrote {
			t.Errorf("--%s=%s writes nothing", fl.Name, value)
		}
	})
	return out
}

// /configz holds a fixed field's accepted value, which must fit the field; and, as the kubelet's,
// no apiVersion or kind.
func TestConfigzFixedFields(t *testing.T) {
	if unfit := fillFixed(&kubeletv1beta1.KubeletConfiguration{}); len(unfit) > 0 {
		t.Errorf("fixed fields whose accepted value does not fit their type: %v", unfit)
	}
	out := loadServing(t, richConfig).KubeletConfiguration()
	if out.Kind != "" || out.APIVersion != "" {
		t.Errorf("apiVersion %q kind %q: the kubelet's /configz has neither", out.APIVersion, out.Kind)
	}
}

// /configz decodes as the kubelet's own type, with its field names, showing the running values:
// flags over the file, defaults filled, fixed fields as the agent behaves.
func TestConfigzDecodesAsKubeletConfiguration(t *testing.T) {
	cfg := loadServing(t, header+"maxPods: 42\nclusterDomain: cluster.example\ncgroupRoot: /custom\nevictionHard: {memory.available: 200Mi}\nmergeDefaultEvictionSettings: true\n",
		"--max-pods=64", "--kubeconfig=/etc/kubernetes/kubelet.conf")
	body, err := json.Marshal(map[string]any{"kubeletconfig": cfg.KubeletConfiguration()})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KubeletConfig upstream.KubeletConfiguration `json:"kubeletconfig"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	kc := got.KubeletConfig
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"maxPods (the flag over the file)", kc.MaxPods, int32(64)},
		{"clusterDomain", kc.ClusterDomain, "cluster.example"},
		{"cgroupRoot", kc.CgroupRoot, "/custom"},
		{"cgroupsPerQOS", *kc.CgroupsPerQOS, true},
		{"evictionHard memory.available", kc.EvictionHard["memory.available"], "200Mi"},
		{"evictionHard nodefs.available (merged default)", kc.EvictionHard["nodefs.available"], "10%"},
		{"syncFrequency (default)", kc.SyncFrequency.Duration.String(), "1m0s"},
		{"port (default)", kc.Port, int32(DefaultPort)},
		{"enableServer", *kc.EnableServer, true},
		{"authorization mode", string(kc.Authorization.Mode), "Webhook"},
		{"enableSystemLogHandler", *kc.EnableSystemLogHandler, true},
		{"enableDebuggingHandlers (fixed)", *kc.EnableDebuggingHandlers, true},
		{"nodeStatusMaxImages (fixed)", *kc.NodeStatusMaxImages, int32(50)},
		{"cgroupDriver (fixed)", kc.CgroupDriver, "cgroupfs"},
		{"kind", kc.Kind, ""},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
