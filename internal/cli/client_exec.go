package cli

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
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			command := args[1:]
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
			in, out, errOut := cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			opts := apiclient.StreamOptions{Stdout: out, Stderr: errOut}
			if stdin {
				opts.Stdin = in
			}
			var restore func()
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
					restore = func() { term.Restore(int(f.Fd()), state) }
					opts.Tty = true
					opts.Stderr = nil
					opts.TerminalSizeQueue = newSizeQueue(f)
				}
			}
			err = c.Exec(cmd.Context(), pod.Namespace, pod.Name, ctr, command, opts)
			if restore != nil {
				restore()
			}
			if code, ok := apiclient.ExitCode(err); ok {
				return exitError{code: code, err: fmt.Errorf("command terminated with exit code %d", code)}
			}
			return err
		},
	}
	cf.bind(cmd, false)
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container (default: the pod's only or default container)")
	f.BoolVarP(&stdin, "stdin", "i", false, "pass stdin to the command")
	f.BoolVarP(&tty, "tty", "t", false, "give the command a terminal (needs -i and a terminal)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only what the command prints")
	return cmd
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
