package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/server/apiclient"
	"github.com/nodelet/nodelet/agent/stats"
)

// newAgentCmd is `nodelet agent`: the kubelet half alone, against any CRI runtime, standalone with
// static pods or joined to a cluster with --kubeconfig.
func newAgentCmd() *cobra.Command {
	var flags *agentconfig.Flags
	var apiSocket string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (a kubelet) against a CRI runtime",
		Long: `Run the node agent: it takes pods from a manifest folder (--pod-manifest-path), a URL
(--manifest-url) and/or a cluster (--kubeconfig), and runs them through the CRI runtime at
--container-runtime-endpoint (nodelet's own by default; containerd's or CRI-O's work the same).
Flags are named like the kubelet's; --config takes a KubeletConfiguration file and flags given on
the command line override it. State lives under --root-dir (default <--root>/agent). The agent's
API (nodelet get pods, logs, exec…) is served on the root-only --api-socket.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.Config()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("root-dir") {
				cfg.RootDir = filepath.Join(global.root, "agent")
			}
			a, err := agent.New(cfg, agent.Options{
				DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(metrics.UnaryClientInterceptor())},
			})
			if err != nil {
				return err
			}
			return runAgent(cmd.Context(), a, cfg, apiSocket)
		},
	}
	flags = agentconfig.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&apiSocket, "api-socket", strings.TrimPrefix(apiclient.DefaultEndpoint, "unix://"),
		"root-only unix socket of the agent's API; empty disables it")
	return cmd
}

// runAgent runs the agent and, beside it, its API on a unix socket and the rotation of container
// logs; either of the agent and its API ending stops both. nodelet up calls it with its own agent.
func runAgent(ctx context.Context, a *agent.Agent, cfg agentconfig.Config, apiSocket string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The kubelet's defaults: rotate a container's log past 10Mi, keep 5 files.
	if rot, err := logs.NewRotator(a.Runtime(), "10Mi", 5); err == nil {
		go rot.Run(ctx, 10*time.Second)
	}
	apiErr := make(chan error, 1)
	if apiSocket != "" {
		summary := stats.New(a.Runtime(), stats.Options{
			NodeName: a.NodeName(), RootDir: cfg.RootDir, LogDir: cfg.PodLogsDir, PodsCgroup: cfg.CgroupRoot,
		})
		srv := server.New(server.Deps{
			NodeName: a.NodeName(), Pods: a, Events: a, Runtime: a.Runtime(),
			SyncLoopHealthy: a.Healthz, Summary: summary.Summary, Config: func() any { return cfg },
		})
		go func() {
			err := srv.Serve(ctx, server.ServeConfig{Socket: apiSocket})
			cancel()
			apiErr <- err
		}()
	} else {
		apiErr <- nil
	}
	runErr := a.Run(ctx)
	cancel()
	if err := <-apiErr; err != nil && !errors.Is(err, context.Canceled) {
		return errors.Join(runErr, err)
	}
	return runErr
}
