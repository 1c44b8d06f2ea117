// Package app holds nodelet's command line: one cobra command per mode, each only wiring the parts
// of the runtime or the agent together. It sits with the command, as the kubelet's cmd/kubelet/app
// does, rather than under internal/: it is the one place that joins both halves, above them.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
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

// newRootCmd builds the command line for args (the arguments after the program name).
func newRootCmd(args []string) *cobra.Command {
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
	// Only the verbs args names are built, or all of them when it names none (the root's help,
	// an unknown verb and its suggestions). Building a verb makes its flags and their defaults —
	// the agent's are the kubelet's hundred — and every mode would otherwise pay for that work and
	// the memory it touches: `nodelet runtime` built `nodelet agent` and `nodelet up` too.
	named := false
	for _, sub := range subcommands {
		named = named || slices.Contains(args, sub.name)
	}
	for _, sub := range subcommands {
		if !named || slices.Contains(args, sub.name) {
			cmd.AddCommand(sub.build())
		}
	}
	return cmd
}

// subcommands lists nodelet's verbs by name with their constructors; each lives in its own file.
var subcommands = []struct {
	name  string
	build func() *cobra.Command
}{
	{"runtime", newRuntimeCmd},
	{"agent", newAgentCmd},
	{"up", newUpCmd},
	{"image", newImageCmd},
	{"get", newGetCmd},
	{"describe", newDescribeCmd},
	{"logs", newLogsCmd},
	{"exec", newExecCmd},
	{"attach", newAttachCmd},
	{"port-forward", newPortForwardCmd},
	{"top", newTopCmd},
}

// Execute runs the command line and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commandLine(os.Args[0], os.Args[1:]).ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// commandLine is the command a program started as argv0 with args runs.
func commandLine(argv0 string, args []string) *cobra.Command {
	args = argsFor(argv0, args)
	cmd := newRootCmd(args)
	cmd.SetArgs(args) // cobra would read os.Args, which a program started as kubelet has no verb in
	return cmd
}

// argsFor is the command line of a program started as argv0. Installed (or linked) as `kubelet`,
// nodelet is the agent: kubeadm's kubelet.service and every tool that looks for the node's
// kubelet by name (`pidof kubelet`, `systemctl status kubelet`) then find it as they find the
// kubelet, with the kubelet's flags.
func argsFor(argv0 string, args []string) []string {
	if filepath.Base(argv0) == "kubelet" {
		return append([]string{"agent"}, args...)
	}
	return args
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
