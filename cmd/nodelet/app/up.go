package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/runtime"
)

// DefaultManifestDir is where `nodelet up` takes static pods from unless told otherwise.
const DefaultManifestDir = "/etc/nodelet/manifests"

// newUpCmd is `nodelet up`, the embedded default: the runtime and the agent in one process, static
// pods from a folder, no cluster. The runtime still serves its CRI socket so crictl can look in.
func newUpCmd() *cobra.Command {
	var rf runtimeFlags
	var af *agentconfig.Flags
	var manifests, apiSocket string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the agent and the runtime together, with static pods from a folder (no cluster needed)",
		Long: `Run nodelet's runtime and agent in one process. Pods come from the manifest folder
(--manifests; Pod YAML or JSON, several per file, beside the RuntimeClasses, ConfigMaps and Secrets
they name), which is watched: add, edit or delete a file and the pods follow. Look inside with 'nodelet get pods', 'nodelet logs', 'nodelet exec', or crictl on
the runtime's socket (--listen).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.Default()
			if st, err := os.Stat(manifests); err != nil || !st.IsDir() {
				return fmt.Errorf("--manifests %s: not a folder (create it, or point at one such as examples/manifests)", manifests)
			}
			if cmd.Flags().Changed("container-runtime-endpoint") {
				return fmt.Errorf("--container-runtime-endpoint: nodelet up runs its own runtime (set its socket with --listen); use nodelet agent for another runtime")
			}
			rcfg, err := rf.config(global.root, global.state, log)
			if err != nil {
				return fmt.Errorf("runtime: %w", err)
			}
			cfg, err := af.Config()
			if err != nil {
				return err
			}
			if err := af.NoServing("nodelet up"); err != nil {
				return err
			}
			// The agent's runtime is the one in this process; its manifests and state follow up's flags.
			cfg.Kubelet.ContainerRuntimeEndpoint = rf.settings.Listen
			if !cmd.Flags().Changed("pod-manifest-path") {
				cfg.Kubelet.StaticPodPath = manifests
			}
			if !cmd.Flags().Changed("root-dir") {
				cfg.RootDir = filepath.Join(global.root, "agent")
			}
			cfg.APISocket = apiSocket
			rt, err := runtime.New(rcfg, runtime.Deps{})
			if err != nil {
				return fmt.Errorf("runtime: %w", err)
			}
			a, err := agent.New(cfg, agent.Deps{Log: log})
			if err != nil {
				rt.Close()
				return fmt.Errorf("agent: %w", err)
			}
			log.Info("nodelet up", "manifests", manifests, "runtime", rf.settings.Listen, "api", apiSocket, "root", global.root)
			return runBoth(ctx, rt, a)
		},
	}
	rf.register(cmd)
	af = agentconfig.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&manifests, "manifests", DefaultManifestDir, "folder of static pod manifests")
	cmd.Flags().StringVar(&apiSocket, "api-socket", "/run/nodelet/agent.sock", "root-only unix socket of the agent's API; empty disables it")
	return cmd
}

// runBoth runs the runtime and the agent side by side until ctx ends or either stops, and stops
// the other then: an agent without its runtime, or a runtime nobody drives, is not `nodelet up`.
func runBoth(ctx context.Context, rt *runtime.Runtime, a *agent.Agent) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rtErr, agentErr := make(chan error, 1), make(chan error, 1)
	go func() { rtErr <- rt.Run(ctx) }()
	// The agent starts once the runtime answers, so its first syncs do not fail and back off.
	select {
	case <-rt.Ready():
	case err := <-rtErr:
		if err == nil {
			return nil // ctx ended first
		}
		return fmt.Errorf("runtime: %w", err)
	}
	go func() { agentErr <- a.Run(ctx) }()
	var errA, errR error
	select {
	case errR = <-rtErr:
		if errR == nil && ctx.Err() == nil {
			errR = errors.New("runtime stopped")
		}
		cancel()
		errA = <-agentErr
	case errA = <-agentErr:
		cancel()
		errR = <-rtErr
	}
	if errR != nil {
		errR = fmt.Errorf("runtime: %w", errR)
	}
	return errors.Join(errR, errA)
}
