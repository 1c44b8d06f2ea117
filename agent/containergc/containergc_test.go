package containergc

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// fakeRuntime holds containers and sandboxes in memory; only what the collector calls.
type fakeRuntime struct {
	containers map[string]*runtimeapi.Container
	logs       map[string]string
	sandboxes  map[string]*runtimeapi.PodSandbox
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r := &runtimeapi.ListContainersResponse{}
	for _, c := range f.containers {
		r.Containers = append(r.Containers, c)
	}
	return r, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	if _, ok := f.containers[in.ContainerId]; !ok {
		return nil, status.Error(codes.NotFound, "no")
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: in.ContainerId, LogPath: f.logs[in.ContainerId]}}, nil
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, in *runtimeapi.RemoveContainerRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	delete(f.containers, in.ContainerId)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	r := &runtimeapi.ListPodSandboxResponse{}
	for _, s := range f.sandboxes {
		r.Items = append(r.Items, s)
	}
	return r, nil
}

func (f *fakeRuntime) RemovePodSandbox(_ context.Context, in *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	for _, c := range f.containers {
		if c.PodSandboxId == in.PodSandboxId {
			delete(f.containers, c.Id) // as CRI: a sandbox's removal takes its containers
		}
	}
	delete(f.sandboxes, in.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

type livePods map[types.UID]bool

func (l livePods) Deleted(uid types.UID) bool { return !l[uid] }

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func (f *fakeRuntime) sandbox(id, uid string, ready bool, age int) {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	f.sandboxes[id] = &runtimeapi.PodSandbox{Id: id, State: st, CreatedAt: t0.Add(time.Duration(-age) * time.Minute).UnixNano(),
		Labels: map[string]string{kubecontainer.LabelPodUID: uid}}
}

func (f *fakeRuntime) container(t *testing.T, id, sandbox, uid, name string, running bool, age int) {
	st := runtimeapi.ContainerState_CONTAINER_EXITED
	if running {
		st = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	f.containers[id] = &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: st,
		CreatedAt: t0.Add(time.Duration(-age) * time.Minute).UnixNano(),
		Labels:    map[string]string{kubecontainer.LabelPodUID: uid, kubecontainer.LabelContainerName: name}}
	dir := filepath.Join(t.TempDir(), "log")
	os.MkdirAll(dir, 0o755)
	f.logs[id] = filepath.Join(dir, "0.log")
	os.WriteFile(f.logs[id], []byte("x"), 0o644)
	os.WriteFile(f.logs[id]+".20261122-000000", []byte("x"), 0o644)
}

func ids[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestCollect(t *testing.T) {
	cases := []struct {
		name           string
		policy         Policy
		wantContainers []string
		wantSandboxes  []string
	}{
		{"default keeps the newest dead per container", DefaultPolicy,
			[]string{"a-dead1", "a-run", "b-dead1", "live-side"}, []string{"sb-live", "sb-live-old"}},
		{"keep two", Policy{MaxPerPodContainer: 2, MaxContainers: -1},
			[]string{"a-dead1", "a-dead2", "a-run", "b-dead1", "live-side"}, []string{"sb-live", "sb-live-old"}},
		{"global limit", Policy{MaxPerPodContainer: 2, MaxContainers: 1},
			[]string{"a-dead1", "a-run", "live-side"}, []string{"sb-live"}},
		{"min age keeps young ones", Policy{MinAge: 4 * time.Minute, MaxPerPodContainer: 1, MaxContainers: -1},
			[]string{"a-dead1", "a-dead2", "a-run", "b-dead1", "gone-young", "live-side"}, []string{"sb-gone", "sb-live", "sb-live-old"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeRuntime{containers: map[string]*runtimeapi.Container{}, logs: map[string]string{}, sandboxes: map[string]*runtimeapi.PodSandbox{}}
			f.sandbox("sb-live", "live", true, 10)
			f.sandbox("sb-live-old", "live", false, 20)
			f.sandbox("sb-gone", "gone", false, 30)
			f.sandbox("sb-gone2", "gone", false, 40)
			f.container(t, "a-run", "sb-live", "live", "a", true, 1)
			f.container(t, "a-dead1", "sb-live", "live", "a", false, 2)
			f.container(t, "a-dead2", "sb-live", "live", "a", false, 5)
			f.container(t, "a-dead3", "sb-live", "live", "a", false, 7)
			f.container(t, "b-dead1", "sb-live-old", "live", "b", false, 12)
			f.container(t, "gone-young", "sb-gone", "gone", "a", false, 3)
			f.container(t, "gone-old", "sb-gone", "gone", "a", false, 31)
			f.container(t, "live-side", "sb-live", "live", "side", true, 3)
			logs := map[string]string{}
			for k, v := range f.logs {
				logs[k] = v
			}
			logsDir := t.TempDir()
			os.MkdirAll(filepath.Join(logsDir, "default_web_live"), 0o755)
			os.MkdirAll(filepath.Join(logsDir, "default_old_gone"), 0o755)
			g := &GC{Runtime: f, Pods: livePods{"live": true}, Policy: c.policy, PodLogsDir: logsDir, Now: func() time.Time { return t0 }}
			if _, err := g.Collect(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := ids(f.containers); !equal(got, c.wantContainers) {
				t.Errorf("containers %v, want %v", got, c.wantContainers)
			}
			if got := ids(f.sandboxes); !equal(got, c.wantSandboxes) {
				t.Errorf("sandboxes %v, want %v", got, c.wantSandboxes)
			}
			for id, p := range logs {
				_, kept := f.containers[id]
				_, err := os.Stat(p)
				_, errRot := os.Stat(p + ".20261122-000000")
				// Containers removed with their sandbox went through the runtime, not the collector: their logs stay.
				if byGC := !kept && f.containers[id] == nil; byGC && id != "gone-old" && id != "gone-young" && (err == nil || errRot == nil) {
					t.Errorf("log of removed %s kept", id)
				}
				if kept && err != nil {
					t.Errorf("log of kept %s removed", id)
				}
			}
			_, errLive := os.Stat(filepath.Join(logsDir, "default_web_live"))
			_, errGone := os.Stat(filepath.Join(logsDir, "default_old_gone"))
			goneLeft := f.sandboxes["sb-gone"] != nil
			if errLive != nil || (errGone == nil) == !goneLeft {
				t.Errorf("pod log dirs: live %v, gone %v (sandbox left %v)", errLive, errGone, goneLeft)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
