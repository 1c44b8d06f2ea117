package app

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
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
API (nodelet get pods, logs, exec…) is served on the root-only --api-socket, and over HTTPS on
--address:--port (10250) in a cluster, or standalone when --port is given: client certificates
checked against --client-ca-file, bearer tokens by TokenReview, requests authorized by
SubjectAccessReview (--authorization-mode Webhook) or let through (AlwaysAllow). The serving
certificate is --tls-cert-file, or one the cluster signs (--rotate-server-certificates), or else
self-signed under --root-dir/pki.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.Config()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("root-dir") {
				cfg.RootDir = filepath.Join(global.root, "agent")
			}
			cfg.APISocket = apiSocket
			a, err := agent.New(cfg, agent.Deps{})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	flags = agentconfig.AddFlags(cmd.Flags())
	agentconfig.AddServingFlags(flags)
	cmd.Flags().StringVar(&apiSocket, "api-socket", strings.TrimPrefix(apiclient.DefaultEndpoint, "unix://"),
		"root-only unix socket of the agent's API; empty disables it")
	return cmd
}
