package cli

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
)

// newAgentCmd is `nodelet agent`: the kubelet half alone, against any CRI runtime, standalone with
// static pods or joined to a cluster with --kubeconfig.
func newAgentCmd() *cobra.Command {
	var flags *agentconfig.Flags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (a kubelet) against a CRI runtime",
		Long: `Run the node agent: it takes pods from a manifest folder (--pod-manifest-path), a URL
(--manifest-url) and/or a cluster (--kubeconfig), and runs them through the CRI runtime at
--container-runtime-endpoint (nodelet's own by default; containerd's or CRI-O's work the same).
Flags are named like the kubelet's; --config takes a KubeletConfiguration file and flags given on
the command line override it. State lives under --root-dir (default <--root>/agent).`,
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
			return a.Run(cmd.Context())
		},
	}
	flags = agentconfig.AddFlags(cmd.Flags())
	return cmd
}
