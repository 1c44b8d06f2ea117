package app

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/config"
)

// runtimeFlags configure the CRI runtime, alone (`nodelet runtime`) or embedded (`nodelet up`).
// The settings, their defaults and what the machine provides are runtime/config's; the flags only
// fill them in.
type runtimeFlags struct {
	settings     config.Settings
	streamingTLS tlsFiles
	registry     registryFlags
}

func (r *runtimeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	d, s := config.Defaults(), &r.settings
	f.StringVar(&s.Listen, "listen", d.Listen, "CRI endpoint to serve")
	f.StringArrayVar(&s.Handlers, "runtime-handler", nil,
		"runtime handler NAME=PATH[,ARG...] (repeatable); defaults: runc, crun and runsc where installed")
	f.StringVar(&s.DefaultHandler, "default-runtime-handler", d.DefaultHandler, "handler for pods that name none (default: crun where installed, else runc)")
	f.StringVar(&s.Conmon, "conmon", "", "conmon binary (default: found in PATH)")
	f.StringVar(&s.Catatonit, "catatonit", "", "catatonit binary, the init of pods that share a PID namespace (default: found in PATH)")
	f.StringVar(&s.CgroupParent, "cgroup-parent", d.CgroupParent, "cgroup parent of pods whose config names none")
	f.StringVar(&s.StreamingAddr, "streaming-address", d.StreamingAddr, "host:port of the exec/attach/port-forward server; beyond loopback it needs --streaming-tls-cert-file")
	r.streamingTLS.bind(f)
	f.StringVar(&s.CNIConfDir, "cni-conf-dir", d.CNIConfDir, "CNI network configs; the first valid .conflist is used")
	f.StringSliceVar(&s.CNIBinDirs, "cni-bin-dir", d.CNIBinDirs, "CNI plugin folders, searched in order")
	f.BoolVar(&s.NoDefaultNetwork, "no-default-network", false, "do not write the default bridge config into an empty --cni-conf-dir")
	f.BoolVar(&s.NoNetwork, "no-network", false, "give pods loopback only (no CNI)")
	f.StringSliceVar(&s.CDISpecDirs, "cdi-spec-dirs", d.CDISpecDirs,
		"folders of CDI device specs, in order of precedence (empty: CDI devices are refused)")
	// CRI-O's name: the kubelet's --container-log-max-size is the rotation size, which this is not.
	f.StringVar(&s.LogSizeMax, "log-size-max", d.LogSizeMax,
		"largest a container's log file may grow, enforced by conmon even while no agent rotates it: "+
			"conmon then starts the file afresh, dropping its content; keep it well above the agent's "+
			"rotation size (containerLogMaxSize, 10Mi by default) (0 or -1: no limit)")
	r.registry.bind(f)
}

// config resolves the flags into the runtime's configuration.
func (r *runtimeFlags) config(root, state string, log *slog.Logger) (config.Config, error) {
	s := r.settings
	var err error
	if s.StreamingTLS, err = r.streamingTLS.config(s.StreamingAddr); err != nil {
		return config.Config{}, err
	}
	cfg, err := s.Resolve(root, state, log)
	if err != nil {
		return config.Config{}, err
	}
	if cfg.Registry, err = r.registry.config(); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
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
