// Package cli holds nodelet's command line: one cobra command per mode, each only wiring the parts
// of the runtime or the agent together.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// globalFlags are shared by every subcommand.
type globalFlags struct {
	root     string
	state    string
	logLevel string
}

var global globalFlags

func newRootCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "nodelet",
		Short:         "A Kubernetes node agent and its own container runtime, in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return setupLogging(global.logLevel)
		},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&global.root, "root", "/var/lib/nodelet", "directory for all persistent state")
	f.StringVar(&global.state, "state", "/run/nodelet", "directory for runtime state (sockets, pinned namespaces)")
	f.StringVar(&global.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	for _, sub := range subcommands {
		cmd.AddCommand(sub())
	}
	return cmd
}

// subcommands lists the constructors of nodelet's verbs; each lives in its own file.
var subcommands = []func() *cobra.Command{
	newRuntimeCmd,
	newAgentCmd,
	newUpCmd,
	newImageCmd,
	newGetCmd,
	newDescribeCmd,
	newLogsCmd,
	newExecCmd,
	newAttachCmd,
	newPortForwardCmd,
	newTopCmd,
}

// Execute runs the command line and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// exitError carries a specific exit code to Execute.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func setupLogging(level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})
	logger := slog.New(h)
	slog.SetDefault(logger)
	// Libraries from Kubernetes log through klog; send it to the same place.
	klog.SetSlogLogger(logger)
	return nil
}
