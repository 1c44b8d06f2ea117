package cri_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/runtime/streaming"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// crictl runs the real crictl against the test's runtime; its config file is the test's own, so no
// /etc/crictl.yaml is read.
func crictl(t *testing.T, e *runtimetest.Env, args ...string) *exec.Cmd {
	t.Helper()
	if testutil.LookPath("crictl") == "" {
		t.Fatal("crictl missing: run `sudo hack/install.sh` (it builds sigs.k8s.io/cri-tools/cmd/crictl@v1.36.0)")
	}
	conf := e.Dir + "/crictl.yaml"
	if _, err := os.Stat(conf); err != nil {
		if err := os.WriteFile(conf, []byte("timeout: 60\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := append([]string{"--config", conf, "--runtime-endpoint", e.Endpoint, "--image-endpoint", e.Endpoint}, args...)
	return exec.Command(testutil.LookPath("crictl"), all...)
}

// TestCrictlExecInteractiveTTY runs `crictl exec -it` on a terminal of its own, as a person would:
// the shell in the container sees a terminal of crictl's size and reads what is typed.
func TestCrictlExecInteractiveTTY(t *testing.T) {
	e := runtimetest.Start(t)
	_, id := runSleeper(e, "crictl-exec")
	for _, transport := range []string{"spdy", "websocket"} {
		t.Run(transport, func(t *testing.T) {
			cmd := crictl(t, e, "exec", "-r", transport, "-it", id, "sh", "-c", waitForSize+`; read l; echo "got $l"; exit 5`)
			stdinR, stdinW := io.Pipe()
			out := &streamBuffer{}
			sizes := make(chan streaming.TerminalSize, 1)
			sizes <- streaming.TerminalSize{Width: 91, Height: 33}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- streaming.RunWithTerminal(ctx, cmd, stdinR, nopCloser{out}, sizes, nil) }()
			defer func() {
				if t.Failed() {
					t.Logf("crictl's terminal showed %q", out.String())
				}
			}()
			eventually(t, "the container's shell reports crictl's terminal size", func() bool { return strings.Contains(out.String(), "size 33 91") })
			io.WriteString(stdinW, "typed\r")
			<-errc // crictl itself exits 1 for any failed command; it prints the code, checked below
			if !strings.Contains(out.String(), "exit code 5") {
				t.Fatalf("crictl exec -it did not report exit code 5: %q", out.String())
			}
			if !strings.Contains(out.String(), "got typed") {
				t.Fatalf("output %q", out.String())
			}
		})
	}
}

// waitForSize prints the terminal's size once it is set. The runtime creates the container's
// terminal at 0x0 and copies the client's size over a moment after the process starts, so a
// command that asks at once may still see 0x0.
const waitForSize = `for i in $(seq 200); do s=$(busybox stty size 2>/dev/null); [ -n "$s" ] && [ "$s" != "0 0" ] && break; sleep 0.05; done; echo "size $s"`

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestCrictlExecSyncAndStream(t *testing.T) {
	e := runtimetest.Start(t)
	_, id := runSleeper(e, "crictl-sync")
	out, err := crictl(t, e, "exec", "-s", id, "echo", "hello sync").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello sync") {
		t.Fatalf("crictl exec -s: %v: %s", err, out)
	}
	for _, transport := range []string{"spdy", "websocket"} {
		cmd := crictl(t, e, "exec", "-r", transport, "-i", id, "sh", "-c", "cat; exit 4")
		cmd.Stdin = strings.NewReader("piped through\n")
		var stderr streamBuffer
		cmd.Stderr = &stderr
		out, _ = cmd.Output()
		if string(out) != "piped through\n" || !strings.Contains(stderr.String(), "exit code 4") {
			t.Fatalf("crictl exec -r %s -i: stdout %q stderr %q", transport, out, stderr.String())
		}
	}
}

func TestCrictlAttach(t *testing.T) {
	e := runtimetest.Start(t)
	pod := runtimetest.PodConfig("crictl-attach")
	sb := e.RunPod(pod, "")
	cfg := runtimetest.ContainerConfig("reader", "sh", "-c", `read l; echo "got $l"`)
	cfg.Stdin, cfg.StdinOnce = true, true
	id := e.RunContainer(sb, pod, cfg)
	cmd := crictl(t, e, "attach", "-i", id)
	cmd.Stdin = strings.NewReader("over attach\n")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "got over attach") {
		t.Fatalf("crictl attach: %v: %q", err, out)
	}
	// The same over WebSocket (v5), to a second container.
	cfg2 := runtimetest.ContainerConfig("reader2", "sh", "-c", `read l; echo "got $l"`)
	cfg2.Stdin, cfg2.StdinOnce = true, true
	id2 := e.RunContainer(sb, pod, cfg2)
	cmd = crictl(t, e, "attach", "-r", "websocket", "-i", id2)
	cmd.Stdin = strings.NewReader("over websocket\n")
	out, err = cmd.Output()
	if err != nil || !strings.Contains(string(out), "got over websocket") {
		t.Fatalf("crictl attach -r websocket: %v: %q", err, out)
	}
}

func TestCrictlPortForward(t *testing.T) {
	e := runtimetest.Start(t)
	pod := runtimetest.PodConfig("crictl-pf")
	sb := e.RunPod(pod, "")
	web := e.RunContainer(sb, pod, runtimetest.ContainerConfig("web", "sh", "-c",
		"mkdir -p /tmp/www && echo via-crictl > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"))
	// A refused connection ends crictl's port-forward session, so forward only once httpd listens.
	e.WaitListening(web, 8080)

	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := crictl(t, e, "port-forward", sb, fmt.Sprintf("%d:8080", local))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Forwarding from") && !once {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("crictl port-forward never reported forwarding")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	r, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", local))
	if err != nil {
		t.Fatalf("GET through crictl port-forward: %v", err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || string(body) != "via-crictl\n" {
		t.Fatalf("GET through crictl port-forward: %s %q", r.Status, body)
	}
}
