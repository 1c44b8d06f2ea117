package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/server/apiclient"
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
			a, err := agent.New(cfg, agent.Options{})
			if err != nil {
				return err
			}
			return runAgent(cmd.Context(), a, apiSocket)
		},
	}
	flags = agentconfig.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&apiSocket, "api-socket", strings.TrimPrefix(apiclient.DefaultEndpoint, "unix://"),
		"root-only unix socket of the agent's API; empty disables it")
	return cmd
}

// runAgent runs the agent and, beside it, its API on a unix socket; either ending stops both.
// nodelet up can call it with its own agent.
func runAgent(ctx context.Context, a *agent.Agent, apiSocket string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	apiErr := make(chan error, 1)
	if apiSocket != "" {
		srv := server.New(server.Deps{NodeName: a.NodeName(), Pods: a, Events: a, Runtime: a.Runtime(), SyncLoopHealthy: a.Healthz})
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
