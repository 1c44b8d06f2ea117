package app

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newLogsCmd is `nodelet logs [-f] [--previous] POD [-c CONTAINER]`, with kubectl's flags.
func newLogsCmd() *cobra.Command {
	var cf clientFlags
	var (
		container            string
		follow, previous, ts bool
		tail, limitBytes     int64
		since                time.Duration
		sinceTime            string
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [--previous] POD [-c CONTAINER]",
		Short: "Print a container's log (like kubectl logs)",
		Example: `  nodelet logs web
  nodelet logs -f web -c nginx --tail 20
  nodelet logs --previous web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := podName(args[0]); err != nil {
				return err
			}
			opts := v1.PodLogOptions{Follow: follow, Previous: previous, Timestamps: ts}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			if limitBytes > 0 {
				opts.LimitBytes = &limitBytes
			}
			if since != 0 && sinceTime != "" {
				return errors.New("at most one of --since or --since-time may be given")
			}
			if since != 0 {
				secs := int64((since + time.Second - 1) / time.Second)
				opts.SinceSeconds = &secs
			}
			if sinceTime != "" {
				t, err := time.Parse(time.RFC3339, sinceTime)
				if err != nil {
					return fmt.Errorf("--since-time: %w", err)
				}
				mt := metav1.NewTime(t)
				opts.SinceTime = &mt
			}
			c, pod, ctr, err := cf.container(cmd, args[0], container)
			if err != nil {
				return err
			}
			body, err := c.Logs(cmd.Context(), pod.Namespace, pod.Name, ctr, opts)
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(cmd.OutOrStdout(), body)
			if err != nil && cmd.Context().Err() != nil {
				return nil // interrupted while following
			}
			return err
		},
	}
	cf.bind(cmd, false)
	bindContainer(cmd, &container)
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing as the container writes")
	f.BoolVarP(&previous, "previous", "p", false, "print the log of the previous, terminated instance of the container")
	f.BoolVar(&ts, "timestamps", false, "prefix each line with its RFC3339 time")
	f.Int64Var(&tail, "tail", -1, "lines from the end to show (-1: all)")
	f.Int64Var(&limitBytes, "limit-bytes", 0, "stop after this many bytes (0: no limit)")
	f.DurationVar(&since, "since", 0, "only lines newer than this, e.g. 5s, 2m, 3h")
	f.StringVar(&sinceTime, "since-time", "", "only lines after this RFC3339 time")
	return cmd
}
