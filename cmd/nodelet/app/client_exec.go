package app

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodelet/nodelet/agent/server/apiclient"
)

// newExecCmd is `nodelet exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARGS...]`. Its exit code is
// the command's, as with kubectl.
func newExecCmd() *cobra.Command {
	var cf clientFlags
	var container string
	var stdin, tty, quiet bool
	cmd := &cobra.Command{
		Use:   "exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARGS...]",
		Short: "Run a command in a container (like kubectl exec)",
		Example: `  nodelet exec web -- date
  nodelet exec -it web -c nginx -- sh`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 || dash != 1 || len(args) < 2 {
				return errors.New("you must give one pod and then the command after --, e.g. nodelet exec POD -- COMMAND")
			}
			command := args[1:]
			c, pod, ctr, err := cf.container(cmd, args[0], container)
			if err != nil {
				return err
			}
			opts, restore, err := streamOptions(cmd, stdin, tty, quiet)
			if err != nil {
				return err
			}
			err = c.Exec(cmd.Context(), pod.Namespace, pod.Name, ctr, command, opts)
			restore()
			if code, ok := apiclient.ExitCode(err); ok {
				return exitError{code: code, err: fmt.Errorf("command terminated with exit code %d", code)}
			}
			return err
		},
	}
	cf.bind(cmd, false)
	bindContainer(cmd, &container)
	bindStreamFlags(cmd, "command", &stdin, &tty, &quiet)
	return cmd
}

// bindStreamFlags adds kubectl's -i, -t and -q for a verb streaming to what ("command", "container").
func bindStreamFlags(cmd *cobra.Command, what string, stdin, tty, quiet *bool) {
	f := cmd.Flags()
	f.BoolVarP(stdin, "stdin", "i", false, "pass stdin to the "+what)
	f.BoolVarP(tty, "tty", "t", false, "give the "+what+" a terminal (needs -i and a terminal)")
	f.BoolVarP(quiet, "quiet", "q", false, "print only what the "+what+" prints")
}

// streamOptions wires the verb's stdio to the stream, with a terminal when -t is given and kubectl's
// rule holds (-i too, and stdin a real terminal; else a warning and plain streams). restore puts
// the terminal back and is never nil.
func streamOptions(cmd *cobra.Command, stdin, tty, quiet bool) (opts apiclient.StreamOptions, restore func(), err error) {
	in, errOut := cmd.InOrStdin(), cmd.ErrOrStderr()
	opts = apiclient.StreamOptions{Stdout: cmd.OutOrStdout(), Stderr: errOut}
	if stdin {
		opts.Stdin = in
	}
	restore = func() {}
	if !tty {
		return opts, restore, nil
	}
	f, ok := in.(*os.File)
	if !stdin || !ok || !term.IsTerminal(int(f.Fd())) {
		if !quiet {
			fmt.Fprintln(errOut, "Unable to use a TTY - input is not a terminal or the right kind of file")
		}
		return opts, restore, nil
	}
	state, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return opts, nil, err
	}
	opts.Tty, opts.Stderr = true, nil
	opts.TerminalSizeQueue = newSizeQueue(f)
	return opts, func() { term.Restore(int(f.Fd()), state) }, nil
}

// sizeQueue reports the terminal's size at start and on every SIGWINCH.
type sizeQueue struct {
	f  *os.File
	ch chan remotecommand.TerminalSize
}

func newSizeQueue(f *os.File) *sizeQueue {
	q := &sizeQueue{f: f, ch: make(chan remotecommand.TerminalSize, 1)}
	q.push()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	go func() {
		for range sig {
			q.push()
		}
	}()
	return q
}

func (q *sizeQueue) push() {
	w, h, err := term.GetSize(int(q.f.Fd()))
	if err != nil {
		return
	}
	select {
	case q.ch <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}:
	default:
	}
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.ch
	if !ok {
		return nil
	}
	return &s
}
