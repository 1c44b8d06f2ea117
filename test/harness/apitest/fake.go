// Package apitest runs the agent API on fakes: pods in memory, a CRI runtime in memory whose
// containers write real CRI log files and whose exec/attach/port-forward go through a real
// k8s.io/cri-streaming server. The API's own tests and the client verbs' tests use it.
package apitest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Pods is a PodSource and EventSource in memory.
type Pods struct {
	mu     sync.Mutex
	pods   []*v1.Pod
	events map[string][]v1.Event
}

func (p *Pods) Pods() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*v1.Pod(nil), p.pods...)
}

func (p *Pods) Pod(ns, name string) (*v1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range p.pods {
		if pod.Namespace == ns && pod.Name == name {
			return pod, true
		}
	}
	return nil, false
}

func (p *Pods) PodEvents(ns, name string) []v1.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events[ns+"/"+name]
}

// Update changes a pod in place, as the agent's status manager would.
func (p *Pods) Update(ns, name string, fn func(*v1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pod := range p.pods {
		if pod.Namespace == ns && pod.Name == name {
			cp := pod.DeepCopy()
			fn(cp)
			p.pods[i] = cp
		}
	}
}

// AddEvent records an event about a pod.
func (p *Pods) AddEvent(ns, name, typ, reason, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.events == nil {
		p.events = map[string][]v1.Event{}
	}
	p.events[ns+"/"+name] = append(p.events[ns+"/"+name], v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", name, len(p.events[ns+"/"+name])), Namespace: ns},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
		Source:        v1.EventSource{Component: "nodelet"},
		LastTimestamp: metav1.NewTime(Now.Add(-time.Minute)),
	})
}

// Runtime is a CRI RuntimeService in memory with a real streaming server.
type Runtime struct {
	LogDir string

	mu         sync.Mutex
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	statuses   map[string]*runtimeapi.ContainerStatus
	notReady   bool
	stream     streaming.Server
	nextID     int
}

// AddPod puts a running pod with its containers (each with an empty log file) into pods and rt,
// and returns it.
func (f *Fixture) AddPod(ns, name string, containers ...string) *v1.Pod {
	uid := types.UID(fmt.Sprintf("uid-%s-%s", ns, name))
	created := Now.Add(-5 * time.Minute)
	pod := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{"app": name}},
		Spec:       v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: "10.88.0.5", HostIP: "192.168.1.10",
			PodIPs:     []v1.PodIP{{IP: "10.88.0.5"}},
			StartTime:  &metav1.Time{Time: created},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}},
			QOSClass:   v1.PodQOSBestEffort,
		},
	}
	rt := f.Runtime
	rt.mu.Lock()
	sbID := rt.newID("sb")
	rt.sandboxes = append(rt.sandboxes, &runtimeapi.PodSandbox{
		Id: sbID, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: created.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: string(uid)},
		Labels:   map[string]string{"io.kubernetes.pod.uid": string(uid)},
	})
	rt.mu.Unlock()
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "docker.io/library/busybox:latest",
			Ports: []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}})
		id := f.StartContainer(pod, c)
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c, Image: "docker.io/library/busybox:latest", ImageID: "sha256:abc", ContainerID: "nodelet://" + id,
			Ready: true, Started: ptr(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(created)}},
		})
	}
	f.Pods.mu.Lock()
	f.Pods.pods = append(f.Pods.pods, pod)
	f.Pods.mu.Unlock()
	return pod
}

func ptr[T any](v T) *T { return &v }

func (rt *Runtime) newID(prefix string) string {
	rt.nextID++
	return fmt.Sprintf("%s%04d", prefix, rt.nextID)
}

// StartContainer makes a new running attempt of the named container (the previous one exits) and
// returns its ID. Its log is LogDir/<ns>_<name>_<uid>/<container>/<attempt>.log.
func (f *Fixture) StartContainer(pod *v1.Pod, name string) string {
	rt := f.Runtime
	rt.mu.Lock()
	defer rt.mu.Unlock()
	attempt := 0
	for _, c := range rt.containers {
		if c.Labels["io.kubernetes.pod.uid"] == string(pod.UID) && c.Metadata.Name == name {
			attempt++
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.State = runtimeapi.ContainerState_CONTAINER_EXITED
				rt.statuses[c.Id].State = c.State
			}
		}
	}
	var sb string
	for _, s := range rt.sandboxes {
		if s.Metadata.Uid == string(pod.UID) {
			sb = s.Id
		}
	}
	id := rt.newID("ctr")
	logPath := filepath.Join(rt.LogDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name, fmt.Sprintf("%d.log", attempt))
	os.MkdirAll(filepath.Dir(logPath), 0o755)
	os.WriteFile(logPath, nil, 0o644)
	c := &runtimeapi.Container{
		Id: id, PodSandboxId: sb, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		CreatedAt: time.Now().UnixNano() + int64(rt.nextID), // strictly increasing
		Metadata:  &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(attempt)},
		Image:     &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:latest"},
		Labels:    map[string]string{"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": name},
	}
	rt.containers = append(rt.containers, c)
	rt.statuses[id] = &runtimeapi.ContainerStatus{Id: id, State: c.State, LogPath: logPath, Metadata: c.Metadata}
	return id
}

// WriteLog appends CRI log lines ("stdout F text") stamped now to a container's log.
func (rt *Runtime) WriteLog(id string, lines ...string) error {
	rt.mu.Lock()
	st := rt.statuses[id]
	rt.mu.Unlock()
	if st == nil {
		return fmt.Errorf("no container %s", id)
	}
	fh, err := os.OpenFile(st.LogPath, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintf(fh, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), l); err != nil {
			return err
		}
	}
	return nil
}

// Exit marks a container exited.
func (rt *Runtime) Exit(id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, c := range rt.containers {
		if c.Id == id {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		}
	}
	if st := rt.statuses[id]; st != nil {
		st.State = runtimeapi.ContainerState_CONTAINER_EXITED
	}
}

// SetNotReady makes Status report the runtime not ready.
func (rt *Runtime) SetNotReady(b bool) {
	rt.mu.Lock()
	rt.notReady = b
	rt.mu.Unlock()
}

func (rt *Runtime) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: !rt.notReady, Reason: "FakeDown"},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

func (rt *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, s := range rt.sandboxes {
		if st := req.GetFilter().GetState(); st != nil && st.State != s.State {
			continue
		}
		if !matches(s.Labels, req.GetFilter().GetLabelSelector()) {
			continue
		}
		out = append(out, s)
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (rt *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range rt.containers {
		if st := req.GetFilter().GetState(); st != nil && st.State != c.State {
			continue
		}
		if !matches(c.Labels, req.GetFilter().GetLabelSelector()) {
			continue
		}
		out = append(out, c)
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (rt *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	st := rt.statuses[req.GetContainerId()]
	if st == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.GetContainerId())
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(st).(*runtimeapi.ContainerStatus)}, nil
}

func (rt *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest, _ ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	return rt.stream.GetExec(req)
}

func (rt *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest, _ ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	return rt.stream.GetAttach(req)
}

func (rt *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest, _ ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	return rt.stream.GetPortForward(req)
}

func (rt *Runtime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*runtimeapi.PodSandboxStats
	for _, s := range rt.sandboxes {
		ps := &runtimeapi.PodSandboxStats{Attributes: &runtimeapi.PodSandboxAttributes{Id: s.Id, Metadata: s.Metadata}, Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:    &runtimeapi.CpuUsage{Timestamp: time.Now().UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 5e9}, UsageNanoCores: &runtimeapi.UInt64Value{Value: 2_000_000}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: time.Now().UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 12 << 20}},
		}}
		for _, c := range rt.containers {
			if c.PodSandboxId == s.Id && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				ps.Linux.Containers = append(ps.Linux.Containers, &runtimeapi.ContainerStats{
					Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata},
					Cpu:        &runtimeapi.CpuUsage{Timestamp: time.Now().UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 5e9}, UsageNanoCores: &runtimeapi.UInt64Value{Value: 2_000_000}},
					Memory:     &runtimeapi.MemoryUsage{Timestamp: time.Now().UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 12 << 20}},
				})
			}
		}
		out = append(out, ps)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}

func (rt *Runtime) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest, ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake: use ListPodSandboxStats")
}

// streamRuntime is what the fake containers do when exec'd, attached or port-forwarded:
//
//	echo ARGS...   prints ARGS
//	cat            copies stdin to stdout
//	exit N         exits with code N
//	tty            prints whether it has a terminal and its size
//
// Attach copies stdin to stdout; a forwarded port echoes "<port>:" and what it reads.
type streamRuntime struct{}

func (streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	switch cmd[0] {
	case "echo":
		fmt.Fprintln(out, strings.Join(cmd[1:], " "))
	case "cat":
		if in != nil {
			io.Copy(out, in)
		}
	case "exit":
		n, _ := strconv.Atoi(cmd[1])
		fmt.Fprintf(errw, "exiting with %d\n", n)
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", n), Code: n}
	case "tty":
		size := "none"
		if tty {
			select {
			case s := <-resize:
				size = fmt.Sprintf("%dx%d", s.Width, s.Height)
			case <-time.After(2 * time.Second):
			}
		}
		fmt.Fprintf(out, "tty=%v size=%s\n", tty, size)
	default:
		fmt.Fprintf(errw, "%s: not found\n", cmd[0])
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code 127"), Code: 127}
	}
	return nil
}

func (streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	if in != nil {
		io.Copy(out, in)
	}
	return nil
}

func (streamRuntime) PortForward(ctx context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%d:", port)
	_, err := io.Copy(stream, stream)
	return err
}

// Now is the fixtures' present: their pods were created 5 minutes before it and their events
// recorded 1 minute before. A client under test that takes it as its clock prints the same
// ages however long the test runs.
var Now = time.Now()

// Fixture is a fake agent: its pods, its runtime, the API on them.
type Fixture struct {
	Pods    *Pods
	Runtime *Runtime
}

// NewFixture starts the fake runtime's streaming server on loopback.
func NewFixture(t testing.TB) *Fixture {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = l.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: l.Addr().String()}
	ss, err := streaming.NewServer(cfg, streamRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: ss}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return &Fixture{
		Pods:    &Pods{},
		Runtime: &Runtime{LogDir: t.TempDir(), statuses: map[string]*runtimeapi.ContainerStatus{}, stream: ss},
	}
}
