package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nodelet/nodelet/agent/server/apiclient"
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
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			pod, err := c.Pod(cmd.Context(), cf.namespace, name)
			if err != nil {
				return notFound(err, name)
			}
			ctr, err := pickContainer(cmd, pod, container)
			if err != nil {
				return err
			}
			in, errOut := cmd.InOrStdin(), cmd.ErrOrStderr()
			opts := apiclient.StreamOptions{Stdout: cmd.OutOrStdout(), Stderr: errOut}
			if stdin {
				opts.Stdin = in
			}
			if tty {
				f, ok := in.(*os.File)
				if !stdin || !ok || !term.IsTerminal(int(f.Fd())) {
					if !quiet {
						fmt.Fprintln(errOut, "Unable to use a TTY - input is not a terminal or the right kind of file")
					}
				} else {
					state, err := term.MakeRaw(int(f.Fd()))
					if err != nil {
						return err
					}
					defer term.Restore(int(f.Fd()), state)
					opts.Tty, opts.Stderr = true, nil
					opts.TerminalSizeQueue = newSizeQueue(f)
				}
			}
			if !quiet && stdin {
				fmt.Fprintln(errOut, "If you don't see a command prompt, try pressing enter.")
			}
			return c.Attach(cmd.Context(), pod.Namespace, pod.Name, ctr, opts)
		},
	}
	cf.bind(cmd, false)
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container (default: the pod's only or default container)")
	f.BoolVarP(&stdin, "stdin", "i", false, "pass stdin to the container")
	f.BoolVarP(&tty, "tty", "t", false, "the container's stdio is a terminal (needs -i and a terminal)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only what the container prints")
	return cmd
}
