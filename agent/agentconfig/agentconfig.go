// Package agentconfig is the agent's configuration: flags named like the kubelet's, and a --config
// file in the kubelet's own KubeletConfiguration format (kubelet.config.k8s.io/v1beta1), decoded
// strictly so a misspelt field is an error rather than a silently ignored setting. Flags given on the
// command line win over the file, as with the kubelet.
package agentconfig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/eviction"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
)

// Defaults. The agent keeps its state apart from the runtime's (/var/lib/nodelet/runtime) so either
// can be wiped alone.
const (
	DefaultRuntimeEndpoint = "unix:///run/nodelet/runtime.sock"
	DefaultRootDir         = "/var/lib/nodelet/agent"
	DefaultPodLogsDir      = "/var/log/pods"
	DefaultMaxPods         = 110
	DefaultResolvConf      = "/etc/resolv.conf"
	DefaultCgroupRoot      = "/kubepods"
	DefaultHealthzPort     = 10248
	// DefaultPodInfraContainerImage is the kubelet's: image GC leaves it alone.
	DefaultPodInfraContainerImage = "registry.k8s.io/pause:3.10"
)

// Config is the resolved configuration the agent runs with; Default and Flags.Config make one
// (the file format's optional fields are then never nil). A setting the kubelet has in its
// KubeletConfiguration is a field of Kubelet: making one honoured takes its rule in fields.go, a
// bindFlags line if it has a flag, and a setDefaults line if its default is not the zero value.
type Config struct {
	// Kubelet is the settings in the file format: the --config file, its defaults, and the
	// kubelet-named flags over them.
	Kubelet kubeletv1beta1.KubeletConfiguration
	Options
	Derived
}

// Derived is what is worked out from the settings: by Config from the command line, by Complete
// from the rest.
type Derived struct {
	// NodeName is HostnameOverride or the lower-cased hostname; never looked up in DNS.
	NodeName string
	// NodeIPs are --node-ip's addresses, or the one detected.
	NodeIPs []string
	// EvictionThresholds are the eviction settings parsed.
	EvictionThresholds []eviction.Threshold
	// SystemReservedList and KubeReservedList are systemReserved and kubeReserved parsed;
	// reservedSystemCPUs replaces their cpu.
	SystemReservedList, KubeReservedList v1.ResourceList
	// PortSet says the HTTPS API's port was asked for (--port, or the file's port or enableServer):
	// standalone, the API goes on TCP only then. Default and nodelet up have port 0: no HTTPS API.
	PortSet bool
}

// Default is the configuration with no flags and no file; it serves no HTTPS API.
func Default() Config {
	var kc kubeletv1beta1.KubeletConfiguration
	setDefaults(&kc)
	return Config{Kubelet: kc, Options: defaultOptions(&kc)}
}

func parseIPs(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if net.ParseIP(p) == nil {
			return nil, fmt.Errorf("--node-ip: %q is not an IP address", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Complete fills derived fields and checks the result.
func Complete(c *Config) error {
	if c.NodeName == "" {
		c.NodeName = c.HostnameOverride
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w", err)
		}
		c.NodeName = h
	}
	c.NodeName = strings.ToLower(strings.TrimSpace(c.NodeName))
	if len(c.NodeIPs) == 0 {
		if ip := detectNodeIP(); ip != "" {
			c.NodeIPs = []string{ip}
		}
	}
	var errs []error
	if !strings.HasPrefix(c.Kubelet.ContainerRuntimeEndpoint, "unix://") && !strings.HasPrefix(c.Kubelet.ContainerRuntimeEndpoint, "/") {
		errs = append(errs, fmt.Errorf("container runtime endpoint %q: want unix:///path", c.Kubelet.ContainerRuntimeEndpoint))
	}
	if c.Kubelet.PodsPerCore < 0 {
		errs = append(errs, fmt.Errorf("podsPerCore %d: must not be negative", c.Kubelet.PodsPerCore))
	}
	if c.Kubelet.PodCIDR != "" {
		if err := validatePodCIDR(c.Kubelet.PodCIDR); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Kubelet.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("max pods %d: must be positive", c.Kubelet.MaxPods))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("root dir is required"))
	}
	if c.Kubelet.SyncFrequency.Duration <= 0 {
		errs = append(errs, errors.New("sync frequency must be positive"))
	}
	if *c.Kubelet.SerializeImagePulls && *c.Kubelet.MaxParallelImagePulls > 1 {
		errs = append(errs, fmt.Errorf("maxParallelImagePulls %d needs serializeImagePulls false", *c.Kubelet.MaxParallelImagePulls))
	}
	if *c.Kubelet.MaxParallelImagePulls < 0 {
		errs = append(errs, fmt.Errorf("maxParallelImagePulls %d: must not be negative", *c.Kubelet.MaxParallelImagePulls))
	}
	if h, l := *c.Kubelet.ImageGCHighThresholdPercent, *c.Kubelet.ImageGCLowThresholdPercent; h < 0 || h > 100 || l < 0 || l > 100 || l > h {
		errs = append(errs, fmt.Errorf("image GC thresholds high %d%% low %d%%: want 0 ≤ low ≤ high ≤ 100", h, l))
	}
	if _, err := sysctl.New(c.Kubelet.AllowedUnsafeSysctls); err != nil {
		errs = append(errs, fmt.Errorf("allowedUnsafeSysctls: %w", err))
	}
	ts, err := eviction.ParseThresholds(eviction.Settings{Hard: c.Kubelet.EvictionHard, Soft: c.Kubelet.EvictionSoft,
		SoftGracePeriod: c.Kubelet.EvictionSoftGracePeriod, MinimumReclaim: c.Kubelet.EvictionMinimumReclaim})
	if err != nil {
		errs = append(errs, err)
	}
	c.EvictionThresholds = ts
	if c.Kubelet.EvictionMaxPodGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("evictionMaxPodGracePeriod %d: must not be negative", c.Kubelet.EvictionMaxPodGracePeriod))
	}
	if c.Kubelet.EvictionPressureTransitionPeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("evictionPressureTransitionPeriod %s: must not be negative", c.Kubelet.EvictionPressureTransitionPeriod.Duration))
	}
	if c.EvictionMonitoringInterval <= 0 {
		c.EvictionMonitoringInterval = eviction.DefaultMonitoringInterval
	}
	if q, err := resource.ParseQuantity(c.Kubelet.ContainerLogMaxSize); err != nil || q.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("containerLogMaxSize %q: want a positive quantity such as 10Mi", c.Kubelet.ContainerLogMaxSize))
	}
	if *c.Kubelet.ContainerLogMaxFiles < 2 {
		errs = append(errs, fmt.Errorf("containerLogMaxFiles %d: must be at least 2", *c.Kubelet.ContainerLogMaxFiles))
	}
	if c.Kubelet.ContainerLogMonitorInterval.Duration < 3*time.Second {
		errs = append(errs, fmt.Errorf("containerLogMonitorInterval %s: must be at least 3s", c.Kubelet.ContainerLogMonitorInterval.Duration))
	}
	errs = append(errs, completeAllocatable(c))
	errs = append(errs, checkNodeLabels(c.NodeLabels), checkTaints(c.Kubelet.RegisterWithTaints), checkHost(c))
	return errors.Join(errs...)
}

// validatePodCIDR checks podCIDR as the runtime will read it: comma-separated CIDRs, at most one
// of each IP family.
func validatePodCIDR(v string) error {
	var v4, v6 int
	for _, c := range strings.Split(v, ",") {
		ip, _, err := net.ParseCIDR(strings.TrimSpace(c))
		if err != nil {
			return fmt.Errorf("podCIDR %q: %v", v, err)
		}
		if ip.To4() != nil {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("podCIDR %q: at most one CIDR of each IP family", v)
	}
	return nil
}
