package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPortForwardCmd is `nodelet port-forward POD [LOCAL:]REMOTE...`: listens on local ports and
// carries each connection into the pod's network namespace, until interrupted.
func newPortForwardCmd() *cobra.Command {
	var cf clientFlags
	var addresses []string
	cmd := &cobra.Command{
		Use:   "port-forward POD [LOCAL_PORT:]REMOTE_PORT...",
		Short: "Forward local ports to a pod (like kubectl port-forward)",
		Example: `  nodelet port-forward web 8080:80
  nodelet port-forward web :80 --address 0.0.0.0`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, pod, err := cf.pod(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if pod.Status.Phase != "" && pod.Status.Phase != "Running" {
				return errors.New("unable to forward port because pod is not running. Current status=" + string(pod.Status.Phase))
			}
			stop := make(chan struct{})
			ready := make(chan struct{})
			pf, err := c.PortForwarder(pod.Namespace, pod.Name, args[1:], addresses, stop, ready, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			go func() {
				<-cmd.Context().Done()
				close(stop)
			}()
			return pf.ForwardPorts()
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().StringSliceVar(&addresses, "address", []string{"localhost"}, "addresses to listen on (comma-separated); localhost means 127.0.0.1 and ::1")
	return cmd
}
