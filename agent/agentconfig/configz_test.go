package agentconfig

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
	upstream "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

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

// What /configz shows of every honoured field is what the file asked for: the conversion is the
// reading's reverse. A field newly honoured fails here until /configz shows it too.
func TestKubeletConfigurationShowsEveryHonouredField(t *testing.T) {
	var in kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict([]byte(richConfig), &in); err != nil {
		t.Fatal(err)
	}
	if err := checkFields(&in); err != nil {
		t.Fatal(err)
	}
	out := loadServing(t, richConfig).KubeletConfiguration()
	vin, vout := reflect.ValueOf(in), reflect.ValueOf(out)
	index := kubeletConfigIndex.Get()
	for name, rule := range kubeletConfigFields.Get() {
		switch name {
		case "apiVersion/kind", "mergeDefaultEvictionSettings", "evictionHard":
			continue // not shown, as the kubelet; already merged into evictionHard; checked below
		}
		if !rule.honoured {
			continue
		}
		got, want := vout.Field(index[name]), vin.Field(index[name])
		if want.IsZero() {
			t.Errorf("%s: the test's file leaves it out; give it a value other than the default", name)
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("%s: /configz shows %s, the file says %s", name, show(got), show(want))
		}
	}
	if out.Kind != "" || out.APIVersion != "" {
		t.Errorf("apiVersion %q kind %q: the kubelet's /configz has neither", out.APIVersion, out.Kind)
	}
	if unfit := fillFixed(&kubeletv1beta1.KubeletConfiguration{}); len(unfit) > 0 {
		t.Errorf("fixed fields whose accepted value does not fit their type: %v", unfit)
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
