// Package config is the runtime's configuration in one place: the Config the runtime is built
// from, the defaults of the settings a person chooses, the OCI runtimes found on the machine, and
// where the runtime keeps its files under the daemon's --root and --state. `nodelet runtime`,
// `nodelet up`, `nodelet image` and the test harness all resolve their runtime here, so they
// agree on every default and every path.
package config

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/runtime/cdi"
	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// Config is the runtime's whole configuration, as runtime.New takes it.
type Config struct {
	// Engine configures the sandbox and container lifecycle behind the RuntimeService;
	// runtime.New fills its Images and Network.
	Engine engine.Config
	// ImageDir holds the image store (blobs, layers, rootfs).
	ImageDir string
	Registry imagestore.RegistryConfig
	// Network configures pod networking through CNI; nil gives pods loopback only.
	Network *cni.Options
	// Listen is the CRI endpoint served (unix:///run/nodelet/runtime.sock).
	Listen string
}

// The defaults of Settings.
const (
	DefaultListen = "unix:///run/nodelet/runtime.sock"
	// DefaultHandler "" picks the first of PreferredHandlers that is installed or configured.
	DefaultHandler       = ""
	DefaultCgroupParent  = "/nodelet"
	DefaultStreamingAddr = "127.0.0.1:0"
	DefaultCNIConfDir    = cni.DefaultConfDir
	DefaultLogSizeMax    = "1Gi"
)

// Settings are what a person chooses for the runtime (the flags of `nodelet runtime` and
// `nodelet up`), as given; Resolve checks them and finds what they leave to the machine.
type Settings struct {
	Listen string
	// Handlers are NAME=PATH[,ARG...] specs (--runtime-handler); none offers the KnownHandlers
	// that are installed.
	Handlers       []string
	DefaultHandler string
	// Conmon and Catatonit are their binaries; "" finds them in PATH.
	Conmon, Catatonit string
	CgroupParent      string
	StreamingAddr     string
	// StreamingTLS makes the streaming server speak HTTPS; nil keeps it plain, on loopback.
	StreamingTLS *tls.Config
	// LogSizeMax caps each container's log file, as a quantity ("1Gi"; "0" or "-1": no cap).
	//
	// conmon counts bytes across the agent's rotations and truncates the live file when the count
	// passes the cap, so each wrap drops at most what the agent had not rotated yet (its
	// containerLogMaxSize, 10Mi by default): 1Gi keeps that loss under 1% for a chatty container
	// while still bounding a container's disk use when no agent runs.
	LogSizeMax string
	CNIConfDir string
	// CNIBinDirs are the plugin folders, searched in order.
	CNIBinDirs []string
	// NoDefaultNetwork leaves an empty CNIConfDir empty instead of writing the default bridge.
	NoDefaultNetwork bool
	// NoNetwork gives pods loopback only (no CNI).
	NoNetwork bool
	// CDISpecDirs are where CDI device specs are read, in order of precedence; none refuses
	// every CDI device.
	CDISpecDirs []string
}

// Defaults returns the settings of a runtime nobody configured.
func Defaults() Settings {
	return Settings{
		Listen:         DefaultListen,
		DefaultHandler: DefaultHandler,
		CgroupParent:   DefaultCgroupParent,
		StreamingAddr:  DefaultStreamingAddr,
		LogSizeMax:     DefaultLogSizeMax,
		CNIConfDir:     DefaultCNIConfDir,
		CNIBinDirs:     append([]string(nil), cni.DefaultBinDirs...),
		CDISpecDirs:    append([]string(nil), cdi.DefaultSpecDirs...),
	}
}

// PreferredHandlers are, in order, the handlers a runtime with no --default-runtime-handler runs
// pods with. crun first, as CRI-O has it: it creates a container in about two thirds of runc's
// time and execs in a fraction of it (a C program, with no Go runtime to start and no copy of its
// own binary per call; bench/README.md), and Debian's runc 1.1.5 is, by upstream version, below
// the fixes of four container escapes (knownEscapes) where crun 1.8.1 is not.
var PreferredHandlers = []string{"crun", "runc"}

// KnownHandlers are the OCI runtimes nodelet knows by name; only installed ones are offered.
var KnownHandlers = []string{
	"runc",
	"crun",
	// gVisor: one sandbox per pod, its own network stack in the pod's namespace and the pod's
	// cgroup (runsc's defaults; the runtime adds --network=host for host-network pods).
	"runsc",
}

// Resolve turns the settings into the runtime's Config, with its dirs under the daemon's root
// and state dirs (--root, --state) and the binaries it was not told of found on the machine.
func (s Settings) Resolve(root, state string, log *slog.Logger) (Config, error) {
	return s.resolve(root, state, log, LookBinary)
}

// resolve is Resolve with look finding a binary by name ("" when it is not installed).
func (s Settings) resolve(root, state string, log *slog.Logger, look func(string) string) (Config, error) {
	eng, err := s.engineConfig(root, state, log, look)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Engine: eng, ImageDir: ImageDir(root), Listen: s.Listen}
	if !s.NoNetwork {
		cfg.Network = &cni.Options{
			ConfDir: s.CNIConfDir,
			BinDirs: s.CNIBinDirs,
			// The result cache outlives a reboot, as host-local's IP store on disk does.
			StateDir:  filepath.Join(eng.Root, "cni"),
			NoDefault: s.NoDefaultNetwork,
			Logger:    log,
		}
	}
	return cfg, nil
}

func (s Settings) engineConfig(root, state string, log *slog.Logger, look func(string) string) (engine.Config, error) {
	cfg := engine.Config{
		Root:           RuntimeRoot(root),
		State:          RuntimeState(state),
		Handlers:       map[string]engine.Handler{},
		DefaultHandler: s.DefaultHandler,
		CgroupParent:   s.CgroupParent,
		StreamingAddr:  s.StreamingAddr,
		StreamingTLS:   s.StreamingTLS,
		Logger:         log,
	}
	if len(s.Handlers) == 0 {
		for _, name := range KnownHandlers {
			if p := look(name); p != "" {
				cfg.Handlers[name] = engine.Handler{Name: name, Path: p}
			}
		}
	}
	for _, spec := range s.Handlers {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" || rest == "" {
			return cfg, fmt.Errorf("--runtime-handler %q: want NAME=PATH[,ARG...]", spec)
		}
		parts := strings.Split(rest, ",")
		cfg.Handlers[name] = engine.Handler{Name: name, Path: parts[0], Args: parts[1:]}
	}
	for name, h := range cfg.Handlers {
		if _, err := os.Stat(h.Path); err != nil {
			return cfg, fmt.Errorf("runtime handler %s: %w", name, err)
		}
		h.Root = HandlerRoot(state, name)
		cfg.Handlers[name] = h
	}
	if cfg.DefaultHandler == "" {
		for _, name := range PreferredHandlers {
			if _, ok := cfg.Handlers[name]; ok {
				cfg.DefaultHandler = name
				break
			}
		}
		if cfg.DefaultHandler == "" {
			return cfg, fmt.Errorf("no default runtime handler: neither %s is installed or configured (apt-get install -y crun runc, or hack/install.sh; or --default-runtime-handler)", strings.Join(PreferredHandlers, " nor "))
		}
	}
	if _, ok := cfg.Handlers[cfg.DefaultHandler]; !ok {
		return cfg, fmt.Errorf("default runtime handler %q is not installed or configured (apt-get install -y runc, or hack/install.sh)", cfg.DefaultHandler)
	}
	cfg.ConmonPath = s.Conmon
	if cfg.ConmonPath == "" {
		cfg.ConmonPath = look("conmon")
	}
	if cfg.ConmonPath == "" {
		return cfg, fmt.Errorf("conmon not found: apt-get install -y conmon (or hack/install.sh)")
	}
	logMax, err := LogSizeMax(s.LogSizeMax)
	if err != nil {
		return cfg, err
	}
	cfg.ContainerLogMaxSize = logMax
	cfg.CatatonitPath = s.Catatonit
	if cfg.CatatonitPath == "" {
		cfg.CatatonitPath = look("catatonit")
	}
	if len(s.CDISpecDirs) > 0 {
		devices, err := cdi.New(s.CDISpecDirs)
		if err != nil {
			return cfg, err
		}
		cfg.Devices = devices
	}
	return cfg, nil
}

// LogSizeMax parses a log size cap ("100Mi", "0", "-1"); 0 means no limit.
func LogSizeMax(v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("--log-size-max %q: %w", v, err)
	}
	n := q.Value()
	if n < -1 {
		return 0, fmt.Errorf("--log-size-max %q: want a size, 0 or -1", v)
	}
	return max(n, 0), nil
}

// LookBinary finds an executable by name in PATH and then in the usual system folders, which a
// daemon started with a bare PATH may lack; "" when it is not installed.
func LookBinary(name string) string {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
