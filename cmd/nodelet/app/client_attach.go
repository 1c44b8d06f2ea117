package app

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newAttachCmd is `nodelet attach [-i] [-t] POD [-c CONTAINER]`: joins the main process's stdio.
func newAttachCmd() *cobra.Command {
	var cf clientFlags
	var container string
	var stdin, tty, quiet bool
	cmd := &cobra.Command{
		Use:   "attach [-i] [-t] POD [-c CONTAINER]",
		Short: "Attach to a running container's stdio (like kubectl attach)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, pod, ctr, err := cf.container(cmd, args[0], container)
			if err != nil {
				return err
			}
			opts, restore, err := streamOptions(cmd, stdin, tty, quiet)
			if err != nil {
				return err
			}
			defer restore()
			if !quiet && stdin {
				fmt.Fprintln(cmd.ErrOrStderr(), "If you don't see a command prompt, try pressing enter.")
			}
			return c.Attach(cmd.Context(), pod.Namespace, pod.Name, ctr, opts)
		},
	}
	cf.bind(cmd, false)
	bindContainer(cmd, &container)
	bindStreamFlags(cmd, "container", &stdin, &tty, &quiet)
	return cmd
}
