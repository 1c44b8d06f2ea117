package agentconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/eviction"
	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// The two commands that read the agent's configuration: nodelet agent, with the HTTPS API's
// flags, and nodelet up, which serves no HTTPS API.
var modes = []string{"agent", "up"}

// outcome is what a command line comes to: the command's error, or the configuration.
type outcome struct {
	err, noServing string
	cfg            Config
}

func writeFile(t *testing.T, file string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run resolves a command line as the commands do: Config, and NoServing in nodelet up.
func run(t *testing.T, mode string, c loadCase) outcome {
	fs, f := commandFlags(mode)
	return resolve(t, fs, c, func() (Config, string, error) {
		cfg, err := f.Config()
		if err != nil || mode == "agent" {
			return cfg, "", err
		}
		return cfg, errString(f.NoServing("nodelet up")), nil
	})
}

func commandFlags(mode string) (*pflag.FlagSet, *Flags) {
	fs := pflag.NewFlagSet(mode, pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	f := AddFlags(fs)
	if mode == "agent" {
		AddServingFlags(f)
	}
	return fs, f
}

func resolve(t *testing.T, fs *pflag.FlagSet, c loadCase, config func() (Config, string, error)) outcome {
	args := c.args
	var path string
	if c.file != "" {
		path = writeFile(t, c.file)
		args = append(append([]string{}, args...), "--config="+path)
	}
	hide := func(s string) string {
		if path == "" {
			return s
		}
		return strings.ReplaceAll(s, path, "<file>")
	}
	if err := fs.Parse(args); err != nil {
		return outcome{err: "parse: " + err.Error()}
	}
	cfg, noServing, err := config()
	if err != nil {
		return outcome{err: hide(err.Error())}
	}
	return outcome{cfg: cfg, noServing: hide(noServing)}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// testdata/load.golden holds what every case resolves to, in both commands: the first case of
// each in full, the others as they differ from it; and each command's help. Made when the
// configuration was read by another pipeline and found equal to it, it keeps the flags' meaning,
// the refusals and /configz as they were. NODELET_UPDATE_GOLDEN=1 rewrites it.
func TestLoadGolden(t *testing.T) {
	var b strings.Builder
	for _, mode := range modes {
		fs, _ := commandFlags(mode)
		fmt.Fprintf(&b, "== %s: help\n%s", mode, fs.FlagUsages())
		var base map[string]string
		for i, c := range loadCases {
			o := run(t, mode, c)
			fmt.Fprintf(&b, "== %s: %s\n", mode, c.name)
			if o.err != "" {
				fmt.Fprintf(&b, "error: %s\n", o.err)
				continue
			}
			if o.noServing != "" {
				fmt.Fprintf(&b, "nodelet up refuses: %s\n", o.noServing)
			}
			flat := flatten(t, viewOf(o.cfg))
			if i == 0 {
				base = flat
			}
			writeDiff(&b, base, flat, i == 0)
		}
	}
	path := filepath.Join("testdata", "load.golden")
	if os.Getenv("NODELET_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(g) || i < len(w); i++ {
			if i >= len(g) || i >= len(w) || g[i] != w[i] {
				t.Fatalf("%s differs from line %d:\n got %q\nwant %q\n(NODELET_UPDATE_GOLDEN=1 rewrites it)", path, i+1, at(g, i), at(w, i))
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end>"
}

// view is what a resolved configuration means: /configz, and what /configz does not show.
type view struct {
	Configz                    kubeletv1beta1.KubeletConfiguration
	Kubeconfig                 string
	HostnameOverride, NodeName string
	NodeIPs                    []string
	RootDir, PodsCgroup        string
	NodeLabels                 map[string]string
	MinimumContainerTTL        string
	MaxPerPodContainer         int
	MaxContainers              int
	PodInfraContainerImage     string
	EvictionMonitoringInterval string
	KubeAPIQPS                 float32
	PortSet                    bool
	EvictionThresholds         []eviction.Threshold
	SystemReservedList         v1.ResourceList
	KubeReservedList           v1.ResourceList
	APISocket                  string
}

func viewOf(c Config) view {
	v := view{Configz: c.KubeletConfiguration(), Kubeconfig: c.Kubeconfig, HostnameOverride: c.HostnameOverride,
		NodeName: c.NodeName, NodeIPs: c.NodeIPs, RootDir: c.RootDir, PodsCgroup: c.PodsCgroup, NodeLabels: c.NodeLabels,
		MinimumContainerTTL: c.MinimumContainerTTL.String(), MaxPerPodContainer: c.MaxPerPodContainer, MaxContainers: c.MaxContainers,
		PodInfraContainerImage: c.PodInfraContainerImage, EvictionMonitoringInterval: c.EvictionMonitoringInterval.String(),
		KubeAPIQPS: c.KubeAPIQPS, PortSet: c.PortSet, EvictionThresholds: c.EvictionThresholds,
		SystemReservedList: c.SystemReservedList, KubeReservedList: c.KubeReservedList, APISocket: c.APISocket}
	// What the host decides is named, not written: the golden file holds for every host.
	if h, err := os.Hostname(); err == nil && c.HostnameOverride == "" && v.NodeName == strings.ToLower(strings.TrimSpace(h)) {
		v.NodeName = "<hostname>"
	}
	var detected []string
	if ip := detectNodeIP(); ip != "" {
		detected = []string{ip}
	}
	if reflect.DeepEqual(v.NodeIPs, detected) {
		v.NodeIPs = []string{"<detected>"}
	}
	return v
}

// flatten writes v as path = JSON value, one line per leaf.
func flatten(t *testing.T, v any) map[string]string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(path string, n any)
	walk = func(path string, n any) {
		switch n := n.(type) {
		case map[string]any:
			if len(n) > 0 {
				for k, c := range n {
					walk(path+"."+k, c)
				}
				return
			}
		case []any:
			if len(n) > 0 {
				for i, c := range n {
					walk(fmt.Sprintf("%s[%d]", path, i), c)
				}
				return
			}
		}
		var leaf strings.Builder
		enc := json.NewEncoder(&leaf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(n); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(path, ".")] = strings.TrimSuffix(leaf.String(), "\n")
	}
	walk("", tree)
	return out
}

// writeDiff writes the lines of flat that differ from base ("path -" for one base has and flat
// has not), or all of flat.
func writeDiff(b *strings.Builder, base, flat map[string]string, all bool) {
	var lines []string
	for k, v := range flat {
		if all || base[k] != v {
			lines = append(lines, k+" = "+v)
		}
	}
	for k := range base {
		if _, ok := flat[k]; !ok {
			lines = append(lines, k+" -")
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// agent/integration hands a child agent its Config as JSON: every setting the agent honours
// survives the trip (a fixed one, logging's zero infoBufferSize say, may come back spelt otherwise).
func TestConfigSurvivesJSON(t *testing.T) {
	index, rules := kubeletConfigIndex.Get(), kubeletConfigFields.Get()
	for _, c := range []Config{Default(), loadServing(t, richConfig), loadServing(t, header, append(everyFlag, everyServingFlag...)...)} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		vb, vc := reflect.ValueOf(back.Kubelet), reflect.ValueOf(c.Kubelet)
		for name, i := range index {
			if a, b := vb.Field(i).Interface(), vc.Field(i).Interface(); rules[name].honoured && !reflect.DeepEqual(a, b) {
				t.Errorf("%s after JSON: %#v, want %#v", name, a, b)
			}
		}
		if !reflect.DeepEqual(back.Options, c.Options) || back.PortSet != c.PortSet {
			t.Errorf("after JSON: %+v %v, want %+v %v", back.Options, back.PortSet, c.Options, c.PortSet)
		}
	}
}
