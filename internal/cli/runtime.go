package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/server"
)

// runtimeFlags configure the CRI runtime, alone (`nodelet runtime`) or embedded (`nodelet up`).
type runtimeFlags struct {
	listen         string
	handlers       []string
	defaultHandler string
	conmon         string
	catatonit      string
	cgroupParent   string
	streamingAddr  string
	streamingTLS   tlsFiles
	registry       registryFlags
	cniConfDir     string
	cniBinDirs     []string
	noDefaultCNI   bool
	noNetwork      bool
	logMaxSize     string
}

func (r *runtimeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.listen, "listen", "unix:///run/nodelet/runtime.sock", "CRI endpoint to serve")
	f.StringArrayVar(&r.handlers, "runtime-handler", nil,
		"runtime handler NAME=PATH[,ARG...] (repeatable); defaults: runc, crun and runsc where installed")
	f.StringVar(&r.defaultHandler, "default-runtime-handler", "runc", "handler for pods that name none")
	f.StringVar(&r.conmon, "conmon", "", "conmon binary (default: found in PATH)")
	f.StringVar(&r.catatonit, "catatonit", "", "catatonit binary, the init of pods that share a PID namespace (default: found in PATH)")
	f.StringVar(&r.cgroupParent, "cgroup-parent", "/nodelet", "cgroup parent of pods whose config names none")
	f.StringVar(&r.streamingAddr, "streaming-address", "127.0.0.1:0", "host:port of the exec/attach/port-forward server; beyond loopback it needs --streaming-tls-cert-file")
	r.streamingTLS.bind(f)
	f.StringVar(&r.cniConfDir, "cni-conf-dir", cni.DefaultConfDir, "CNI network configs; the first valid .conflist is used")
	f.StringSliceVar(&r.cniBinDirs, "cni-bin-dir", cni.DefaultBinDirs, "CNI plugin folders, searched in order")
	f.BoolVar(&r.noDefaultCNI, "no-default-network", false, "do not write the default bridge config into an empty --cni-conf-dir")
	f.BoolVar(&r.noNetwork, "no-network", false, "give pods loopback only (no CNI)")
	// CRI-O's name: the kubelet's --container-log-max-size is the rotation size, which this is not.
	// conmon counts bytes across the agent's rotations and truncates the live file when the count
	// passes the cap, so each wrap drops at most what the agent had not rotated yet (its
	// containerLogMaxSize, 10Mi by default): 1Gi keeps that loss under 1% for a chatty container
	// while still bounding a container's disk use when no agent runs.
	f.StringVar(&r.logMaxSize, "log-size-max", "1Gi",
		"largest a container's log file may grow, enforced by conmon even while no agent rotates it: "+
			"conmon then starts the file afresh, dropping its content; keep it well above the agent's "+
			"rotation size (containerLogMaxSize, 10Mi by default) (0 or -1: no limit)")
	r.registry.bind(f)
}

// handlerDefaults are the OCI runtimes nodelet knows by name; only installed ones are offered.
var handlerDefaults = []struct {
	name string
	args []string
}{
	{"runc", nil},
	{"crun", nil},
	// gVisor: one sandbox per pod, its own network stack in the pod's namespace and the pod's
	// cgroup (runsc's defaults; the runtime adds --network=host for host-network pods).
	{"runsc", nil},
}

// config resolves the flags into the runtime's configuration.
func (r *runtimeFlags) config(root, state string, log *slog.Logger) (runtime.Config, error) {
	srv, err := r.serverConfig(root, state, log)
	if err != nil {
		return runtime.Config{}, err
	}
	reg, err := r.registry.config()
	if err != nil {
		return runtime.Config{}, err
	}
	cfg := runtime.Config{Server: srv, ImageDir: imageStoreDir(root), Registry: reg, Listen: r.listen}
	if !r.noNetwork {
		cfg.Network = &cni.Options{
			ConfDir: r.cniConfDir,
			BinDirs: r.cniBinDirs,
			// The result cache outlives a reboot, as host-local's IP store on disk does.
			StateDir:  filepath.Join(srv.Root, "cni"),
			NoDefault: r.noDefaultCNI,
			Logger:    log,
		}
	}
	return cfg, nil
}

func (r *runtimeFlags) serverConfig(root, state string, log *slog.Logger) (server.Config, error) {
	cfg := server.Config{
		Root:           filepath.Join(root, "runtime"),
		State:          filepath.Join(state, "runtime"),
		Handlers:       map[string]server.Handler{},
		DefaultHandler: r.defaultHandler,
		CgroupParent:   r.cgroupParent,
		StreamingAddr:  r.streamingAddr,
		Logger:         log,
	}
	var err error
	if cfg.StreamingTLS, err = r.streamingTLS.config(r.streamingAddr); err != nil {
		return cfg, err
	}
	if len(r.handlers) == 0 {
		for _, h := range handlerDefaults {
			if p := lookBinary(h.name); p != "" {
				cfg.Handlers[h.name] = server.Handler{Name: h.name, Path: p, Args: h.args}
			}
		}
	}
	for _, spec := range r.handlers {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" || rest == "" {
			return cfg, fmt.Errorf("--runtime-handler %q: want NAME=PATH[,ARG...]", spec)
		}
		parts := strings.Split(rest, ",")
		cfg.Handlers[name] = server.Handler{Name: name, Path: parts[0], Args: parts[1:]}
	}
	for name, h := range cfg.Handlers {
		if _, err := os.Stat(h.Path); err != nil {
			return cfg, fmt.Errorf("runtime handler %s: %w", name, err)
		}
		h.Root = filepath.Join(cfg.State, "oci", name)
		cfg.Handlers[name] = h
	}
	if _, ok := cfg.Handlers[cfg.DefaultHandler]; !ok {
		return cfg, fmt.Errorf("default runtime handler %q is not installed or configured (apt-get install -y runc, or hack/install.sh)", cfg.DefaultHandler)
	}
	cfg.ConmonPath = r.conmon
	if cfg.ConmonPath == "" {
		cfg.ConmonPath = lookBinary("conmon")
	}
	if cfg.ConmonPath == "" {
		return cfg, fmt.Errorf("conmon not found: apt-get install -y conmon (or hack/install.sh)")
	}
	logMax, err := logMaxSize(r.logMaxSize)
	if err != nil {
		return cfg, err
	}
	cfg.ContainerLogMaxSize = logMax
	cfg.CatatonitPath = r.catatonit
	if cfg.CatatonitPath == "" {
		cfg.CatatonitPath = lookBinary("catatonit")
	}
	return cfg, nil
}

// logMaxSize parses --log-size-max ("100Mi", "0", "-1"); 0 means no limit.
func logMaxSize(v string) (int64, error) {
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

func lookBinary(name string) string {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func newRuntimeCmd() *cobra.Command {
	var rf runtimeFlags
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Serve only the CRI runtime, for the kubelet, crictl or nodelet agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRuntime(cmd, &rf)
		},
	}
	rf.register(cmd)
	return cmd
}

func runRuntime(cmd *cobra.Command, rf *runtimeFlags) error {
	cfg, err := rf.config(global.root, global.state, slog.Default())
	if err != nil {
		return err
	}
	rt, err := runtime.New(cfg, runtime.Deps{})
	if err != nil {
		return err
	}
	return rt.Run(cmd.Context())
}
