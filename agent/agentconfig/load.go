package agentconfig

import (
	"fmt"
	"os"
	"reflect"
	"time"

	"sigs.k8s.io/yaml"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// Options are the settings only flags give, as the kubelet's KubeletFlags are, and the few the
// agent's callers set.
type Options struct {
	Kubeconfig       string
	HostnameOverride string
	// NodeIP is --node-ip as given: IP addresses, comma-separated.
	NodeIP  string
	RootDir string
	// NodeLabels are added to the Node at registration (--node-labels).
	NodeLabels map[string]string

	// Container GC, as the kubelet's (deprecated, flag-only) settings.
	MinimumContainerTTL time.Duration
	MaxPerPodContainer  int // dead containers kept per container of a live pod; <0 no limit
	MaxContainers       int // dead containers kept in all; <0 no limit
	// PodInfraContainerImage is never collected (the runtime's sandbox image).
	PodInfraContainerImage string

	// APISocket is the root-only unix socket of the agent's API; "" serves none.
	APISocket string
	// EvictionMonitoringInterval is how often the eviction manager reads signals; the kubelet's is
	// a fixed 10s, which tests shorten.
	EvictionMonitoringInterval time.Duration
	// PodsCgroup is the parent of the pods' QoS cgroups (cgroupfs layout); "" leaves placement to
	// the runtime. --cgroup-root names it, unlike the kubelet's, which names its parent as the
	// file's cgroupRoot does; the file's cgroupRoot and cgroupsPerQOS are read into it.
	PodsCgroup string
	// KubeAPIQPS is the apiserver client's rate (negative: no limit): kubeAPIQPS, or --kube-api-qps,
	// which takes fractions.
	KubeAPIQPS float32
}

// load is the configuration a command line makes, as the kubelet makes its own: the --config
// file (if any) decoded into the file format, the defaults filled, the command line's flags
// replayed over it, and the result completed. serving says the command serves the HTTPS API
// (and has its flags); otherwise its settings are left empty.
func load(file string, serving bool, sets []flagSet) (Config, error) {
	var c Config
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		if c.Kubelet, err = decodeFile(b); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", file, err)
		}
	}
	kc := &c.Kubelet
	c.PortSet = serving && portSet(kc)
	setDefaults(kc)
	if serving {
		setServingDefaults(kc)
	} else {
		clearServing(kc)
	}
	c.Options = defaultOptions(kc)
	if err := replay(sets, serving, kc, &c.Options); err != nil {
		return Config{}, err
	}
	for _, s := range sets {
		switch s.name {
		case "port":
			c.PortSet = true
		case "node-ip":
			var err error
			if c.NodeIPs, err = parseIPs(c.NodeIP); err != nil {
				return Config{}, err
			}
		}
	}
	if err := Complete(&c); err != nil {
		return Config{}, err
	}
	if serving {
		if err := checkServing(kc); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// decodeFile decodes a KubeletConfiguration strictly, so a misspelt field is an error rather than
// a silently ignored setting, and refuses every field set to a value the agent does not honour
// (kubeletConfigFields, docs/kubeletconfig.md).
func decodeFile(data []byte) (kubeletv1beta1.KubeletConfiguration, error) {
	kc, err := decode(data)
	if err != nil {
		return kc, err
	}
	if kc.Kind != "KubeletConfiguration" || kc.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
		return kc, fmt.Errorf("kind %q apiVersion %q: want KubeletConfiguration %s", kc.Kind, kc.APIVersion, kubeletv1beta1.SchemeGroupVersion)
	}
	return kc, checkFields(&kc)
}

func decode(data []byte) (kubeletv1beta1.KubeletConfiguration, error) {
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &kc); err != nil {
		return kc, fmt.Errorf("decode KubeletConfiguration: %w", err)
	}
	return kc, nil
}

// noServing is Flags.NoServing: only the file's serving fields count (Config has checked the rest).
func noServing(file, cmd string) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	kc, err := decode(b)
	if err != nil {
		return fmt.Errorf("--config %s: %w", file, err)
	}
	asked, none := kc, kubeletv1beta1.KubeletConfiguration{}
	setServingDefaults(&asked)
	setServingDefaults(&none)
	if asked.Port == 0 || (!portSet(&kc) && reflect.DeepEqual(servingOf(&asked), servingOf(&none))) {
		return nil
	}
	return fmt.Errorf("--config %s: %s serves no HTTPS API, so the file's serving settings (address, port, TLS, "+
		"authentication, authorization, serverTLSBootstrap) would go unused: leave them out, or run nodelet agent", file, cmd)
}

// servingOf is what the HTTPS API's settings of kc are.
func servingOf(kc *kubeletv1beta1.KubeletConfiguration) any {
	return []any{kc.Address, kc.Port, kc.TLSCertFile, kc.TLSPrivateKeyFile, kc.ServerTLSBootstrap, kc.Authentication, kc.Authorization}
}
