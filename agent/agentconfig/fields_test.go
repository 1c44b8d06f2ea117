package agentconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reflection walk is what keeps the classification complete when k8s.io/kubelet is bumped.
func TestEveryKubeletConfigurationFieldIsClassified(t *testing.T) {
	typ := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	seen := map[string]bool{}
	for i := range typ.NumField() {
		name := jsonName(typ.Field(i))
		seen[name] = true
		if _, ok := kubeletConfigFields.Get()[name]; !ok {
			t.Errorf("KubeletConfiguration field %s (%s) is not classified in kubeletConfigFields: honour it or refuse its non-default values", name, typ.Field(i).Name)
		}
	}
	for name := range kubeletConfigFields.Get() {
		if !seen[name] {
			t.Errorf("kubeletConfigFields classifies %s, which KubeletConfiguration does not have", name)
		}
	}
}

// Every field that is not honoured refuses a value outside its accepted ones, with its name in the
// error: a value made up by reflection for each field, so a new rule cannot accept by mistake.
func TestUnhonouredFieldsRefuseOtherValues(t *testing.T) {
	typ := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	for i := range typ.NumField() {
		name := jsonName(typ.Field(i))
		rule := kubeletConfigFields.Get()[name]
		if rule.honoured {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var kc kubeletv1beta1.KubeletConfiguration
			fv := reflect.ValueOf(&kc).Elem().Field(i)
			fv.Set(oddValue(t, fv.Type(), rule.allowed))
			if fv.IsZero() {
				t.Fatalf("could not make a value for %s", fv.Type())
			}
			err := checkFields(&kc)
			if err == nil || !strings.HasPrefix(err.Error(), name+":") {
				t.Fatalf("%s = %s: err %v, want a refusal naming the field", name, show(fv), err)
			}
		})
	}
}

// oddValue is a non-zero value of t that is none of allowed.
func oddValue(t *testing.T, typ reflect.Type, allowed []any) reflect.Value {
	v := reflect.New(typ).Elem()
	if typ == reflect.TypeOf(metav1.Duration{}) {
		v.Set(reflect.ValueOf(metav1.Duration{Duration: 7 * time.Second}))
		return v
	}
	switch typ.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
		v.Elem().Set(oddValue(t, typ.Elem(), allowed))
	case reflect.Bool:
		v.SetBool(!acceptable(reflect.ValueOf(true), allowed) || len(allowed) == 0)
	case reflect.String:
		v.SetString("nodelet-test-odd")
	case reflect.Int32, reflect.Int64:
		v.SetInt(12345)
	case reflect.Float64:
		v.SetFloat(0.42)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(typ, 1, 1))
		v.Index(0).Set(oddValue(t, typ.Elem(), nil))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(oddValue(t, typ.Key(), nil), oddValue(t, typ.Elem(), nil))
	case reflect.Struct:
		for j := range typ.NumField() {
			if typ.Field(j).IsExported() && typ.Field(j).Type.Kind() != reflect.Struct {
				v.Field(j).Set(oddValue(t, typ.Field(j).Type, nil))
				break
			}
		}
	default:
		t.Fatalf("no odd value for %s", typ)
	}
	return v
}

func TestKubeletConfigurationValues(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want string // "" accepted
	}{
		"cpu manager dynamic":     {"cpuManagerPolicy: dynamic\n", "cpuManagerPolicy"},
		"cpu manager static":      {"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n", ""},
		"reserved cpus":           {"reservedSystemCPUs: 0-x\n", "reservedSystemCPUs"},
		"topology single":         {"topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\n", ""},
		"topology scope":          {"topologyManagerScope: node\n", "topologyManagerScope"},
		"cpu manager none":        {"cpuManagerPolicy: none\n", ""},
		"memory manager static":   {"memoryManagerPolicy: Static\n", "memoryManagerPolicy"},
		"memory manager None":     {"memoryManagerPolicy: None\n", ""},
		"topology restricted":     {"topologyManagerPolicy: restricted\n", "topologyManagerPolicy"},
		"topology none":           {"topologyManagerPolicy: none\n", ""},
		"system reserved":         {"systemReserved: {cpu: 500m}\n", ""},
		"read-only port":          {"readOnlyPort: 10255\n", "readOnlyPort"},
		"read-only port 0":        {"readOnlyPort: 0\n", ""},
		"enforce nothing":         {"enforceNodeAllocatable: []\n", ""},
		"same image endpoint":     {"containerRuntimeEndpoint: unix:///run/x.sock\nimageServiceEndpoint: unix:///run/x.sock\n", ""},
		"other image endpoint":    {"imageServiceEndpoint: unix:///run/y.sock\n", "imageServiceEndpoint"},
		"feature gate":            {"featureGates: {InPlacePodVerticalScaling: true}\n", "featureGates"},
		"systemd driver":          {"cgroupDriver: systemd\n", "cgroupDriver"},
		"swap":                    {"memorySwap: {swapBehavior: LimitedSwap}\n", "memorySwap"},
		"no swap":                 {"memorySwap: {}\n", ""},
		"back-off 300s":           {"crashLoopBackOff: {maxContainerRestartPeriod: 5m}\n", ""},
		"back-off 1m":             {"crashLoopBackOff: {maxContainerRestartPeriod: 1m}\n", "crashLoopBackOff"},
		"userns 65536 ids":        {"userNamespaces: {idsPerPod: 65536}\n", ""},
		"userns default ids":      {"userNamespaces: {}\n", ""},
		"userns 131072 ids":       {"userNamespaces: {idsPerPod: 131072}\n", "userNamespaces"},
		"report == update":        {"nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 20s\n", ""},
		"report != update":        {"nodeStatusReportFrequency: 5m\n", ""},
		"json logs":               {"logging: {format: json}\n", "logging"},
		"verbose":                 {"logging: {verbosity: 4}\n", "logging"},
		"two at once, both named": {"runOnce: true\nshutdownGracePeriod: 30s\n", "runOnce"},
		// What kubeadm writes for logging: no field that changes anything here.
		"kubeadm logging": {"logging: {flushFrequency: 0, options: {json: {infoBufferSize: \"0\"}, text: {infoBufferSize: \"0\"}}, verbosity: 0}\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := configOf(t, header+tc.yaml)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want+":")):
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
	_, err := configOf(t, header+"runOnce: true\nshutdownGracePeriod: 30s\n")
	if err == nil || !strings.Contains(err.Error(), "shutdownGracePeriod:") {
		t.Errorf("every refused field is named: %v", err)
	}
}

// A refused struct value is printed as the file spells it, with the values of its optional
// fields: the same text on every run, which a user can search for in their file.
func TestRefusedStructValuesPrintTheirValues(t *testing.T) {
	for yaml, want := range map[string]string{
		"userNamespaces: {idsPerPod: 131072}\n":               `userNamespaces: {"idsPerPod":131072}: not supported: `,
		"crashLoopBackOff: {maxContainerRestartPeriod: 1m}\n": `crashLoopBackOff: {"maxContainerRestartPeriod":"1m0s"}: not supported: `,
		"memorySwap: {swapBehavior: LimitedSwap}\n":           `memorySwap: {"swapBehavior":"LimitedSwap"}: not supported: `,
	} {
		_, err := configOf(t, header+yaml)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}

func TestKubeletConfigurationFieldsNowHonoured(t *testing.T) {
	cfg, err := configOf(t, header+`kubeAPIQPS: 20
kubeAPIBurst: 40
contentType: application/vnd.kubernetes.protobuf
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
containerLogMonitorInterval: 30s
failSwapOn: false
failCgroupV1: false
`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KubeAPIQPS != 20 || cfg.Kubelet.KubeAPIBurst != 40 || cfg.Kubelet.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("apiserver client: %v %v %q", cfg.KubeAPIQPS, cfg.Kubelet.KubeAPIBurst, cfg.Kubelet.ContentType)
	}
	if cfg.Kubelet.ContainerLogMaxSize != "1Mi" || *cfg.Kubelet.ContainerLogMaxFiles != 3 || cfg.Kubelet.ContainerLogMonitorInterval.Duration != 30*time.Second {
		t.Errorf("log rotation: %q %d %s", cfg.Kubelet.ContainerLogMaxSize, *cfg.Kubelet.ContainerLogMaxFiles, cfg.Kubelet.ContainerLogMonitorInterval.Duration)
	}
	cfg, err = configOf(t, header+"containerLogMaxSize: 1Mi\n", "--container-log-max-size=2Mi", "--kube-api-qps=-1")
	if err != nil || cfg.Kubelet.ContainerLogMaxSize != "2Mi" || cfg.KubeAPIQPS != -1 {
		t.Errorf("flags over the file: %v %q %v", err, cfg.Kubelet.ContainerLogMaxSize, cfg.KubeAPIQPS)
	}
	// The node status report frequency, with the kubelet's defaults.
	for yaml, want := range map[string]time.Duration{
		"":                                 5 * time.Minute,
		"nodeStatusReportFrequency: 1m\n":  time.Minute,
		"nodeStatusUpdateFrequency: 20s\n": 20 * time.Second,
		"nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 2m\n": 2 * time.Minute,
	} {
		if cfg, err := configOf(t, header+yaml); err != nil || cfg.Kubelet.NodeStatusReportFrequency.Duration != want {
			t.Errorf("%q: report frequency %v (%v), want %v", yaml, cfg.Kubelet.NodeStatusReportFrequency.Duration, err, want)
		}
	}
	for _, bad := range []string{"containerLogMaxSize: lots\n", "containerLogMaxFiles: 1\n", "containerLogMonitorInterval: 1s\n"} {
		if _, err := configOf(t, header+bad); err == nil || !strings.Contains(err.Error(), strings.Split(bad, ":")[0]) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestEnableServerFalseServesNoHTTPS(t *testing.T) {
	c := loadServing(t, header+"enableServer: false\nport: 10250\n")
	if c.Kubelet.Port != 0 || !c.PortSet {
		t.Errorf("enableServer false: port %d set %v", c.Kubelet.Port, c.PortSet)
	}
}

func TestHostChecks(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]bool{
		"Filename\tType\tSize\tUsed\tPriority\n":                                  false,
		"Filename\tType\tSize\tUsed\tPriority\n/swapfile  file  1048572  0  -2\n": true,
	} {
		p := filepath.Join(dir, "swaps")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if on, err := swapOn(p); err != nil || on != want {
			t.Errorf("%q: on %v err %v, want %v", body, on, err, want)
		}
	}
	// failCgroupV1 against this host: refused exactly when /sys/fs/cgroup is not cgroup2.
	c := Default()
	c.Kubelet.FailCgroupV1 = new(true)
	_, statErr := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if err := checkHost(&c); (err != nil) != (statErr != nil) {
		t.Errorf("failCgroupV1 on a host where cgroup.controllers exists=%v: %v", statErr == nil, err)
	}
}

// docs/kubeletconfig.md is rendered from kubeletConfigFields; NODELET_UPDATE_DOCS=1 rewrites it.
func TestKubeletConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "kubeletconfig.md")
	want := renderFieldsDoc(t)
	if os.Getenv("NODELET_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date with kubeletConfigFields; rerun with NODELET_UPDATE_DOCS=1", path)
	}
}

func renderFieldsDoc(t *testing.T) string {
	flags := map[string][]string{}
	for flag, fields := range flagFields(t) {
		for _, name := range fields {
			flags[name] = append(flags[name], "`--"+flag+"`")
		}
	}
	var b strings.Builder
	b.WriteString(`# KubeletConfiguration fields in nodelet

The agent reads the kubelet's own configuration file (` + "`--config`" + `, kind KubeletConfiguration,
` + "`kubelet.config.k8s.io/v1beta1`" + `). Every field is either **honoured** (applied; invalid values refused)
or **fixed**: nodelet does one thing there, so the field is accepted only when left out or set to a
value that describes that thing, and any other value is refused at start with an error naming the
field. No field is read and ignored.

This file is generated from ` + "`agent/agentconfig/fields.go`" + ` by its test
(` + "`NODELET_UPDATE_DOCS=1 go test ./agent/agentconfig/ -run Doc`" + `); the test also fails when
k8s.io/kubelet gains a field nobody classified. Kubelet flags nodelet does not define are refused by
the command line as unknown flags. ` + "`nodelet up`" + ` serves no HTTPS API: it refuses a file whose serving
fields (address, port, TLS, authentication, authorization, serverTLSBootstrap) ask for one.

The flags column names the flags that set a field; given on the command line, a flag wins over the
file, as with the kubelet. Only honoured fields have flags.

| field | | flags | what nodelet does | accepted values |
| --- | --- | --- | --- | --- |
`)
	typ := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	for i := range typ.NumField() {
		name := jsonName(typ.Field(i))
		r := kubeletConfigFields.Get()[name]
		status, accepted := "fixed", "left out"
		switch {
		case r.honoured:
			status, accepted = "honoured", r.acceptedValues()
		case r.acceptedDoc != "" || len(r.allowed) > 0:
			accepted = "left out, or " + r.acceptedValues()
		}
		sort.Strings(flags[name])
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", name, status, strings.Join(flags[name], ", "), r.does, strings.ReplaceAll(accepted, "|", `\|`))
	}
	return b.String()
}
