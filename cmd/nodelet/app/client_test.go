package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/test/harness/apitest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// clientFixture is a fake agent behind its API on a unix socket.
type clientFixture struct {
	*apitest.Fixture
	endpoint string
}

func newClientFixture(t *testing.T) *clientFixture {
	t.Helper()
	f := apitest.NewFixture(t)
	fixClock(t)
	sock := f.ServeUnix(t, f.Server(nil))
	return &clientFixture{Fixture: f, endpoint: "unix://" + sock}
}

// fixClock makes the client verbs count ages from the fixtures' present, not the wall clock: a
// slow run, or a test run long after the fixtures' package was loaded, prints the same ages.
func fixClock(t *testing.T) {
	clock = func() time.Time { return apitest.Now }
	t.Cleanup(func() { clock = time.Now })
}

// run executes one verb against the fixture and returns stdout, stderr and the error.
func (f *clientFixture) run(t *testing.T, ctx context.Context, newCmd func() *cobra.Command, stdin io.Reader, args ...string) (string, string, error) {
	t.Helper()
	cmd := newCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if stdin != nil {
		cmd.SetIn(stdin)
	}
	cmd.SetArgs(append([]string{"--agent-endpoint", f.endpoint}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func containerID(p *v1.Pod, i int) string {
	return strings.TrimPrefix(p.Status.ContainerStatuses[i].ContainerID, "nodelet://")
}

var spaces = regexp.MustCompile(` +`)

func TestClientGetPods(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx", "sidecar")
	f.AddPod("default", "api", "app")
	f.AddPod("kube-system", "dns", "coredns")
	ctx := context.Background()

	out, _, err := f.run(t, ctx, newGetCmd, nil, "pods")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || spaces.ReplaceAllString(lines[0], " ") != "NAME READY STATUS RESTARTS AGE" {
		t.Fatalf("table:\n%s", out)
	}
	if got := spaces.ReplaceAllString(lines[2], " "); got != "web 2/2 Running 0 5m" {
		t.Fatalf("row %q", got)
	}

	out, _, err = f.run(t, ctx, newGetCmd, nil, "pods", "-A", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "NAMESPACE") || !strings.Contains(out, "NOMINATED NODE") || !strings.Contains(spaces.ReplaceAllString(out, " "), "kube-system dns 1/1 Running 0 5m 10.88.0.5 node1 <none> <none>") {
		t.Fatalf("wide:\n%s", out)
	}

	out, _, err = f.run(t, ctx, newGetCmd, nil, "pod", "web", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	if err := yaml.Unmarshal([]byte(out), &pod); err != nil || pod.Kind != "Pod" || pod.Name != "web" || len(pod.Spec.Containers) != 2 {
		t.Fatalf("yaml: %v\n%s", err, out)
	}

	out, _, err = f.run(t, ctx, newGetCmd, nil, "pods", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string   `json:"kind"`
		Items []v1.Pod `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("json: %v\n%s", err, out)
	}

	out, _, err = f.run(t, ctx, newGetCmd, nil, "pods", "-A", "-l", "app in (dns,api)", "-o", "name")
	if err != nil || out != "pod/api\npod/dns\n" {
		t.Fatalf("selector: %v %q", err, out)
	}
	if _, _, err := f.run(t, ctx, newGetCmd, nil, "pods", "-l", "app in ("); err == nil {
		t.Fatal("a bad selector was accepted")
	}

	_, _, err = f.run(t, ctx, newGetCmd, nil, "pods", "nosuch")
	if err == nil || !strings.Contains(err.Error(), `pods "nosuch" not found`) {
		t.Fatalf("missing pod: %v", err)
	}
	_, stderr, err := f.run(t, ctx, newGetCmd, nil, "pods", "-n", "empty")
	if err != nil || !strings.Contains(stderr, "No resources found in empty namespace.") {
		t.Fatalf("empty namespace: %v %q", err, stderr)
	}
	if _, _, err := f.run(t, ctx, newGetCmd, nil, "pods", "-o", "table"); err == nil {
		t.Fatal("an unknown output format was accepted")
	}
}

func TestClientPodStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"crash loop", v1.Pod{Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}}, "CrashLoopBackOff"},
		{"completed", v1.Pod{Status: v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}}}}, "Completed"},
		{"init", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{}, {}}}, Status: v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{
			{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}, {State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}}, "Init:1/2"},
		{"init failed", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{}}}, Status: v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{
			{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 2}}}}}}, "Init:ExitCode:2"},
		{"pending", v1.Pod{Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}, "ContainerCreating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podStatus(&tc.pod); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClientDescribePod(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx")
	f.Pods.AddEvent("default", "web", "Normal", "Pulled", "Container image \"busybox\" already present on machine")
	f.Pods.AddEvent("default", "web", "Normal", "Started", "Started container nginx")
	out, _, err := f.run(t, context.Background(), newDescribeCmd, nil, "pod", "web")
	if err != nil {
		t.Fatal(err)
	}
	flat := spaces.ReplaceAllString(out, " ")
	for _, want := range []string{
		"Name: web\n", "Namespace: default\n", "Node: node1/192.168.1.10\n", "Labels: app=web\n", "Status: Running\n",
		"IP: 10.88.0.5\n", "Containers:\n nginx:\n", "Port: 80/TCP\n", "State: Running\n", "Ready: True\n", "Restart Count: 0\n",
		"Conditions:\n Type Status\n Ready True \n", "QoS Class: BestEffort\n",
		"Events:\n Type Reason Age From Message\n", "Normal Started 60s nodelet Started container nginx\n",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := f.run(t, context.Background(), newDescribeCmd, nil, "pod", "nosuch"); err == nil || !strings.Contains(err.Error(), `pods "nosuch" not found`) {
		t.Fatalf("missing pod: %v", err)
	}
}

func TestClientLogs(t *testing.T) {
	f := newClientFixture(t)
	pod := f.AddPod("default", "web", "nginx", "sidecar")
	first := containerID(pod, 0)
	f.Runtime.WriteLog(first, "stdout F crashed once")
	second := f.StartContainer(pod, "nginx")
	f.Runtime.WriteLog(second, "stdout F one", "stderr F two", "stdout F three")
	ctx := context.Background()

	out, stderr, err := f.run(t, ctx, newLogsCmd, nil, "web")
	if err != nil || out != "one\ntwo\nthree\n" || !strings.Contains(stderr, `Defaulted container "nginx" out of: nginx, sidecar`) {
		t.Fatalf("logs: %v %q %q", err, out, stderr)
	}
	out, _, err = f.run(t, ctx, newLogsCmd, nil, "pod/web", "-c", "nginx", "--tail", "1")
	if err != nil || out != "three\n" {
		t.Fatalf("tail: %v %q", err, out)
	}
	out, _, err = f.run(t, ctx, newLogsCmd, nil, "web", "-c", "nginx", "--previous")
	if err != nil || out != "crashed once\n" {
		t.Fatalf("previous: %v %q", err, out)
	}
	out, _, err = f.run(t, ctx, newLogsCmd, nil, "web", "-c", "nginx", "--timestamps", "--since", "1h", "--limit-bytes", "100")
	if err != nil || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z one\n`).MatchString(out) {
		t.Fatalf("timestamps: %v %q", err, out)
	}
	if _, _, err := f.run(t, ctx, newLogsCmd, nil, "web", "-c", "nosuch"); err == nil || !strings.Contains(err.Error(), "container nosuch is not valid for pod web") {
		t.Fatalf("bad container: %v", err)
	}
	if _, _, err := f.run(t, ctx, newLogsCmd, nil, "web", "-c", "sidecar", "--previous"); err == nil || !strings.Contains(err.Error(), "previous terminated container") {
		t.Fatalf("no previous: %v", err)
	}
}

// lineWriter hands each written chunk to a channel so a test can wait for followed lines.
type lineWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.ch <- line
	}
}

func TestClientLogsFollow(t *testing.T) {
	f := newClientFixture(t)
	pod := f.AddPod("default", "web", "nginx")
	id := containerID(pod, 0)
	f.Runtime.WriteLog(id, "stdout F before")
	cmd := newLogsCmd()
	lw := &lineWriter{ch: make(chan string, 16)}
	cmd.SetOut(lw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--agent-endpoint", f.endpoint, "-f", "web"})
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(context.Background()) }()
	if l := <-lw.ch; l != "before\n" {
		t.Fatalf("got %q", l)
	}
	f.Runtime.WriteLog(id, "stdout F live")
	if l := <-lw.ch; l != "live\n" {
		t.Fatalf("got %q", l)
	}
	f.Runtime.Exit(id)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestClientExec(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx")
	ctx := context.Background()

	out, _, err := f.run(t, ctx, newExecCmd, nil, "web", "--", "echo", "hello", "world")
	if err != nil || out != "hello world\n" {
		t.Fatalf("exec: %v %q", err, out)
	}
	out, _, err = f.run(t, ctx, newExecCmd, strings.NewReader("from stdin"), "-i", "web", "-c", "nginx", "--", "cat")
	if err != nil || out != "from stdin" {
		t.Fatalf("exec -i: %v %q", err, out)
	}
	_, stderr, err := f.run(t, ctx, newExecCmd, strings.NewReader(""), "-it", "web", "--", "tty")
	if err != nil || !strings.Contains(stderr, "Unable to use a TTY") {
		t.Fatalf("exec -t without a terminal: %v %q", err, stderr)
	}
	_, stderr, err = f.run(t, ctx, newExecCmd, nil, "web", "--", "exit", "7")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 7 || !strings.Contains(stderr, "exiting with 7") {
		t.Fatalf("exit code: %v %q", err, stderr)
	}
	if _, _, err := f.run(t, ctx, newExecCmd, nil, "web", "echo"); err == nil {
		t.Fatal("a command without -- was accepted")
	}
	if _, _, err := f.run(t, ctx, newExecCmd, nil, "nosuch", "--", "echo"); err == nil || !strings.Contains(err.Error(), `pods "nosuch" not found`) {
		t.Fatalf("missing pod: %v", err)
	}
}

func TestClientPortForward(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx")
	// Pick a free port, then let port-forward listen on it.
	local := testutil.FreePort(t)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := newPortForwardCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--agent-endpoint", f.endpoint, "--address", "127.0.0.1", "web", itoaPort(local) + ":8080"})
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "Forwarding from 127.0.0.1:"+itoaPort(local)+" -> 8080\n" {
		t.Fatalf("port-forward said %q %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	conn, err := net.Dial("tcp", "127.0.0.1:"+itoaPort(local))
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("hello"))
	got := make([]byte, len("8080:hello"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "8080:hello" {
		t.Fatalf("through the tunnel: %q %v", got, err)
	}
	conn.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func itoaPort(p int) string { return strconv.Itoa(p) }

func TestClientTop(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx", "sidecar")
	f.AddPod("kube-system", "dns", "coredns")
	ctx := context.Background()
	out, _, err := f.run(t, ctx, newTopCmd, nil, "pods")
	if err != nil {
		t.Fatal(err)
	}
	if got := spaces.ReplaceAllString(out, " "); got != "NAME CPU(cores) MEMORY(bytes)\nweb 2m 12Mi\n" {
		t.Fatalf("top pods:\n%s", out)
	}
	out, _, err = f.run(t, ctx, newTopCmd, nil, "pods", "-A", "--containers")
	if err != nil {
		t.Fatal(err)
	}
	if got := spaces.ReplaceAllString(out, " "); !strings.Contains(got, "NAMESPACE POD NAME CPU(cores) MEMORY(bytes)\ndefault web nginx 2m 12Mi\ndefault web sidecar 2m 12Mi\nkube-system dns coredns 2m 12Mi\n") {
		t.Fatalf("top pods --containers:\n%s", out)
	}
	if _, stderr, err := f.run(t, ctx, newTopCmd, nil, "pods", "-n", "empty"); err != nil || stderr != "No resources found in empty namespace.\n" {
		t.Fatalf("top pods in an empty namespace: %v %q", err, stderr)
	}
	if _, _, err := f.run(t, ctx, newTopCmd, nil, "pods", "nosuch"); err == nil || !strings.Contains(err.Error(), `pods "nosuch" not found`) {
		t.Fatalf("top of a missing pod: %v", err)
	}
	out, _, err = f.run(t, ctx, newTopCmd, nil, "node")
	if err != nil || !strings.HasPrefix(spaces.ReplaceAllString(out, " "), "NAME CPU(cores) MEMORY(bytes) MEMORY%\nnode1 ") {
		t.Fatalf("top node: %v\n%s", err, out)
	}
}

func TestClientUnreachableAgent(t *testing.T) {
	cmd := newGetCmd()
	cmd.SetOut(io.Discard)
	cmd.SetArgs([]string{"--agent-endpoint", "unix:///nonexistent/agent.sock", "pods"})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "is `nodelet up` or `nodelet agent` running?") {
		t.Fatalf("unreachable agent: %v", err)
	}
}

func TestClientAttach(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx")
	out, _, err := f.run(t, context.Background(), newAttachCmd, strings.NewReader("typed"), "-i", "-q", "web")
	if err != nil || out != "typed" {
		t.Fatalf("attach: %v %q", err, out)
	}
}

// minuteAges matches the seconds of an age such as 5m1s at the end of a row.
var minuteAges = regexp.MustCompile(`m\d+s\n$`)

func TestClientGetPodsWatch(t *testing.T) {
	f := newClientFixture(t)
	f.AddPod("default", "web", "nginx")
	f.AddPod("default", "api", "app")
	old := watchPoll
	watchPoll = 10 * time.Millisecond
	defer func() { watchPoll = old }()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := newGetCmd()
	lw := &lineWriter{ch: make(chan string, 16)}
	cmd.SetOut(lw)
	cmd.SetArgs([]string{"--agent-endpoint", f.endpoint, "pods", "-w"})
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()
	// Ages are cut to minutes: the fixture's pods are 5m old, and a slow run must not see 5m1s.
	for _, want := range []string{"NAME READY STATUS RESTARTS AGE\n", "api 1/1 Running 0 5m\n", "web 1/1 Running 0 5m\n"} {
		if got := minuteAges.ReplaceAllString(spaces.ReplaceAllString(<-lw.ch, " "), "m\n"); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	f.Pods.Update("default", "web", func(p *v1.Pod) {
		p.Status.ContainerStatuses[0].Ready = false
		p.Status.ContainerStatuses[0].RestartCount = 1
		p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	})
	if got := minuteAges.ReplaceAllString(spaces.ReplaceAllString(<-lw.ch, " "), "m\n"); got != "web 0/1 CrashLoopBackOff 1 5m\n" {
		t.Fatalf("changed row %q", got)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A sidecar (an init container that restarts always) counts in READY, and once started lets the
// pod's status follow its containers, as kubectl shows it.
func TestClientPodSidecars(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	yes, no := true, false
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	pod := v1.Pod{
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}},
			Containers:     []v1.Container{{Name: "app"}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning,
			InitContainerStatuses: []v1.ContainerStatus{
				{Name: "setup", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}},
				{Name: "proxy", State: running, Started: &yes, Ready: true},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: running, Started: &yes, Ready: true}},
		},
	}
	if r, n := readyCount(&pod); r != 2 || n != 2 {
		t.Fatalf("READY %d/%d, want 2/2", r, n)
	}
	if got := podStatus(&pod); got != "Running" {
		t.Fatalf("status %q, want Running", got)
	}
	// Not started yet: the pod is still initialising at its second init container, and the
	// sidecar is not ready.
	pod.Status.InitContainerStatuses[1].Started, pod.Status.InitContainerStatuses[1].Ready = &no, false
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	if r, n := readyCount(&pod); r != 0 || n != 2 {
		t.Fatalf("READY %d/%d, want 0/2", r, n)
	}
	if got := podStatus(&pod); got != "Init:1/2" {
		t.Fatalf("status %q, want Init:1/2", got)
	}
}
