// Package fakecri is a hand-written CRI RuntimeService and ImageService served over a real gRPC unix
// socket, for the agent's tests. It keeps sandboxes and containers in memory, records every call, and
// lets a test make containers exit, sandboxes die, pulls fail, or the event stream go away.
package fakecri

import (
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Server is the fake runtime.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	Endpoint string
	Conn     *grpc.ClientConn

	mu         sync.Mutex
	calls      []string
	nextID     int
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
	configs    map[string]*runtimeapi.ContainerConfig // as created, for what a status does not show
	sandboxOf  map[string]string
	images     map[string]string // name → id
	imageUsers map[string]string // name → the user its config names
	pullErrs   map[string]error
	needAuth   map[string]string // image → user whose credentials a pull needs
	startErrs  map[string]error  // container name → error on StartContainer
	updateErrs map[string]error  // container name → error on UpdateContainerResources
	sandboxErr error             // the error of UpdatePodSandboxResources
	memUsage   map[string]uint64 // container name → ContainerStats memory usage
	// stopHolds: container name → StopContainer waits until it is closed.
	stopHolds  map[string]chan struct{}
	exitOnStop int32
	execExit   int32
	noEvents   bool
	notReady   bool
	// cgroupDriver answers RuntimeConfig; nil leaves it unimplemented, as older runtimes are.
	cgroupDriver *runtimeapi.CgroupDriver
	subs         []chan *runtimeapi.ContainerEventResponse
	now          func() time.Time
}

// Start serves a fresh fake on a socket in t.TempDir and dials it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		sandboxes:  map[string]*runtimeapi.PodSandboxStatus{},
		containers: map[string]*runtimeapi.ContainerStatus{},
		configs:    map[string]*runtimeapi.ContainerConfig{},
		sandboxOf:  map[string]string{},
		images:     map[string]string{},
		imageUsers: map[string]string{},
		pullErrs:   map[string]error{},
		needAuth:   map[string]string{},
		startErrs:  map[string]error{},
		updateErrs: map[string]error{},
		memUsage:   map[string]uint64{},
		stopHolds:  map[string]chan struct{}{},
		exitOnStop: 137,
		now:        time.Now,
	}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, s)
	runtimeapi.RegisterImageServiceServer(gs, s)
	go gs.Serve(l)
	s.Endpoint = "unix://" + sock
	conn, err := grpc.NewClient(s.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	s.Conn = conn
	t.Cleanup(func() {
		conn.Close()
		s.mu.Lock()
		for _, c := range s.subs {
			close(c)
		}
		s.subs = nil
		s.mu.Unlock()
		gs.Stop()
	})
	return s
}

// Runtime and Images are clients for the code under test.
func (s *Server) Runtime() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(s.Conn)
}
func (s *Server) Images() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(s.Conn)
}

func (s *Server) record(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// Calls returns the recorded calls, e.g. "RunPodSandbox web", "CreateContainer web/app".
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// CallsWithPrefix filters Calls.
func (s *Server) CallsWithPrefix(prefix string) []string {
	var out []string
	for _, c := range s.Calls() {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// SetClock makes the fake stamp times from now (tests share their fake clock with it).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// AddImage makes an image present.
func (s *Server) AddImage(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images[name] = "sha256:" + fmt.Sprintf("%064x", len(s.images)+1)
}

// SetImageUser makes ImageStatus of the image report user as its config's User ("1000", "0:0",
// "nobody", "" for none), numeric users as a uid, as runtimes do.
func (s *Server) SetImageUser(name, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imageUsers[name] = user
}

// FailPull makes pulls of name fail with err (nil clears).
func (s *Server) FailPull(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.pullErrs, name)
		return
	}
	s.pullErrs[name] = err
}

// HoldStop makes StopContainer of containers with this name, once recorded, wait until release
// is called (a container slow to stop), so a test sees what happens meanwhile.
func (s *Server) HoldStop(name string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.stopHolds[name] = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// SetExecExitCode makes every later ExecSync report code (probes and hooks read it).
func (s *Server) SetExecExitCode(code int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execExit = code
}

// RequireAuth makes pulls of name succeed only with user's credentials.
func (s *Server) RequireAuth(name, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needAuth[name] = user
}

// FailStart makes StartContainer of containers with this name fail.
func (s *Server) FailStart(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startErrs[name] = err
}

// DisableEvents makes GetContainerEvents answer Unimplemented and closes open streams.
func (s *Server) DisableEvents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noEvents = true
	for _, c := range s.subs {
		close(c)
	}
	s.subs = nil
}

// SetNotReady makes Status report RuntimeReady=false.
// SetCgroupDriver has RuntimeConfig report d (unset, RuntimeConfig is unimplemented).
func (s *Server) SetCgroupDriver(d runtimeapi.CgroupDriver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cgroupDriver = &d
}

func (s *Server) SetNotReady(notReady bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notReady = notReady
}

// ExitContainer makes a running container exit with code, as if its process ended.
func (s *Server) ExitContainer(id string, code int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = s.now().UnixNano()
	c.Reason = "Completed"
	if code != 0 {
		c.Reason = "Error"
	}
	s.emit(id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// KillSandbox makes a sandbox NOTREADY (its network or pause process died) and its containers exit.
func (s *Server) KillSandbox(id string) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	if ok {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	var ids []string
	for cid, sid := range s.sandboxOf {
		if sid == id {
			ids = append(ids, cid)
		}
	}
	s.mu.Unlock()
	for _, cid := range ids {
		s.ExitContainer(cid, 137)
	}
}

// Sandbox returns a copy of the sandbox status.
func (s *Server) Sandbox(id string) *runtimeapi.PodSandboxStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		return proto.Clone(sb).(*runtimeapi.PodSandboxStatus)
	}
	return nil
}

// Containers lists copies of all containers, oldest first.
func (s *Server) Containers() []*runtimeapi.ContainerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.ContainerStatus
	for _, c := range s.containers {
		out = append(out, proto.Clone(c).(*runtimeapi.ContainerStatus))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// ContainerConfig returns a copy of the config the container was created with (namespace
// options, such as an ephemeral container's target, show only there), or nil.
func (s *Server) ContainerConfig(id string) *runtimeapi.ContainerConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.configs[id]; ok {
		return proto.Clone(c).(*runtimeapi.ContainerConfig)
	}
	return nil
}

// Sandboxes lists copies of all sandboxes, oldest first.
func (s *Server) Sandboxes() []*runtimeapi.PodSandboxStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.PodSandboxStatus
	for _, sb := range s.sandboxes {
		out = append(out, proto.Clone(sb).(*runtimeapi.PodSandboxStatus))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// RunningContainer returns the ID of the running container of that name, or "".
func (s *Server) RunningContainer(name string) string {
	for _, c := range s.Containers() {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c.Id
		}
	}
	return ""
}

func (s *Server) id(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%04d", prefix, s.nextID)
}

// stamp makes creation times strictly increase, so "newest first" is well defined in tests.
func (s *Server) stamp() int64 {
	return s.now().UnixNano() + int64(s.nextID)
}

func (s *Server) emit(id string, t runtimeapi.ContainerEventType) {
	c := s.containers[id]
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: t, CreatedAt: s.now().UnixNano()}
	if sb := s.sandboxes[s.sandboxOf[id]]; sb != nil {
		ev.PodSandboxStatus = proto.Clone(sb).(*runtimeapi.PodSandboxStatus)
	}
	if c != nil {
		ev.ContainersStatuses = []*runtimeapi.ContainerStatus{proto.Clone(c).(*runtimeapi.ContainerStatus)}
	}
	for _, sub := range s.subs {
		select {
		case sub <- ev:
		default:
		}
	}
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
