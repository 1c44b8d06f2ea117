package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/metrics"
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
(--manifests; Pod YAML or JSON, several per file), which is watched: add, edit or delete a file and
the pods follow. Look inside with 'nodelet get pods', 'nodelet logs', 'nodelet exec', or crictl on
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
			rt, err := startRuntime(ctx, &rf, log)
			if err != nil {
				return fmt.Errorf("runtime: %w", err)
			}
			defer rt.stop()
			cfg, err := af.Config()
			if err != nil {
				return err
			}
			// The agent's runtime is the one in this process; its manifests and state follow up's flags.
			cfg.ContainerRuntimeEndpoint = rf.listen
			if !cmd.Flags().Changed("pod-manifest-path") {
				cfg.PodManifestPath = manifests
			}
			if !cmd.Flags().Changed("root-dir") {
				cfg.RootDir = filepath.Join(global.root, "agent")
			}
			if err := agentconfig.Complete(&cfg); err != nil {
				return err
			}
			conn, err := grpc.NewClient(rf.listen,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithChainUnaryInterceptor(metrics.UnaryClientInterceptor()))
			if err != nil {
				return err
			}
			defer conn.Close()
			a, err := agent.New(cfg, agent.Options{RuntimeConn: conn, Log: log})
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			log.Info("nodelet up", "manifests", manifests, "runtime", rf.listen, "api", apiSocket, "root", global.root)
			errc := make(chan error, 1)
			go func() { errc <- runAgent(ctx, a, cfg, apiSocket) }()
			select {
			case err := <-errc:
				return err
			case err := <-rt.errc:
				return fmt.Errorf("runtime stopped: %w", err)
			}
		},
	}
	rf.register(cmd)
	af = agentconfig.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&manifests, "manifests", DefaultManifestDir, "folder of static pod manifests")
	cmd.Flags().StringVar(&apiSocket, "api-socket", "/run/nodelet/agent.sock", "root-only unix socket of the agent's API; empty disables it")
	return cmd
}
