package kuberuntime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/userns"
)

// handlerOf resolves every RuntimeClass to one handler.
type handlerOf string

func (h handlerOf) Handler(context.Context, string) (string, error) { return string(h), nil }

// usernsFixture is the fake CRI (its default handler "" reports no user namespaces, its "fake"
// handler does) with the agent's user namespace manager over it.
func usernsFixture(t *testing.T) (*fixture, *record.FakeRecorder) {
	f := newFixture(t)
	rec := record.NewFakeRecorder(100)
	u, err := userns.New(userns.Config{RootDir: f.m.RootDir, MaxPods: 110, Handlers: userns.RuntimeHandlers{Runtime: f.cri.Runtime()}})
	if err != nil {
		t.Fatal(err)
	}
	d := f.m.Deps
	d.Recorder, d.Userns, d.RuntimeClasses = rec, u, handlerOf("fake")
	f.m = NewManager(d)
	f.cri.AddImage("busybox")
	return f, rec
}

func hostUsersPod(hostUsers *bool) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.HostUsers = hostUsers
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	return pod
}

// TestHostUsersFalseRefusedOnAHandlerWithoutUserNamespaces: as the kubelet, the sandbox is not
// asked for (the pod never runs with the host's IDs), the pod gets FailedCreatePodSandBox with the
// kubelet's message, and no range is taken.
func TestHostUsersFalseRefusedOnAHandlerWithoutUserNamespaces(t *testing.T) {
	f, rec := usernsFixture(t)
	pod := hostUsersPod(new(bool))
	err := f.sync(pod)
	const msg = "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if err == nil || err.Error() != msg {
		t.Fatalf("sync: %v, want %q", err, msg)
	}
	if calls := f.cri.Calls(); len(calls) != 0 {
		t.Fatalf("runtime calls %q, want none", calls)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	if want := "Warning FailedCreatePodSandBox Failed to create pod sandbox: " + msg; !slices.Contains(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	if _, err := os.Stat(filepath.Join(f.m.RootDir, "pods", string(pod.UID), "userns")); !os.IsNotExist(err) {
		t.Fatalf("a refused pod has a range: %v", err)
	}

	// Through a RuntimeClass whose handler has them, the same pod runs.
	class := "userns"
	pod.Spec.RuntimeClassName = &class
	f.mustSync(pod)
	if calls := f.cri.Calls(); !slices.Contains(calls, "handler fake") {
		t.Fatalf("calls %q", calls)
	}
}

// TestHostUsersFalseGetsItsRangeEverywhere: the sandbox config, the container's namespace options
// and every one of its mounts (the volume, /etc/hosts, the termination log) carry the range
// recorded in pods/<uid>/userns, as the kubelet sends them.
func TestHostUsersFalseGetsItsRangeEverywhere(t *testing.T) {
	f, _ := usernsFixture(t)
	class := "userns"
	pod := hostUsersPod(new(bool))
	pod.Spec.RuntimeClassName = &class
	f.mustSync(pod)

	b, err := os.ReadFile(filepath.Join(f.m.RootDir, "pods", string(pod.UID), "userns"))
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		UIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"uidMappings"`
	}
	if err := json.Unmarshal(b, &cp); err != nil || len(cp.UIDMappings) != 1 {
		t.Fatalf("checkpoint %s: %v", b, err)
	}
	host := cp.UIDMappings[0].HostID
	want := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
		Uids: []*runtimeapi.IDMapping{{HostId: host, ContainerId: 0, Length: 65536}},
		Gids: []*runtimeapi.IDMapping{{HostId: host, ContainerId: 0, Length: 65536}}}
	if host < 65536 {
		t.Fatalf("range starts at %d", host)
	}

	sb, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, want) {
		t.Fatalf("sandbox userns %v, want %v", got, want)
	}
	cs := f.cri.Containers()
	if len(cs) != 1 {
		t.Fatalf("containers %v", cs)
	}
	cfg := f.cri.ContainerConfig(cs[0].Id)
	if got := cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, want) {
		t.Fatalf("container userns %v, want %v", got, want)
	}
	var paths []string
	for _, m := range cfg.Mounts {
		paths = append(paths, m.ContainerPath)
		if !proto.Equal(&runtimeapi.UserNamespace{Uids: m.UidMappings, Gids: m.GidMappings}, &runtimeapi.UserNamespace{Uids: want.Uids, Gids: want.Gids}) {
			t.Errorf("mount %s: mappings %v %v", m.ContainerPath, m.UidMappings, m.GidMappings)
		}
	}
	if got := strings.Join(paths, " "); got != "/scratch /etc/hosts /dev/termination-log" {
		t.Errorf("mounts %s", got)
	}
}

// TestHostUsersLeftOutOrTrueSendModeNode: as the kubelet with user namespaces supported, every
// other pod is sent mode NODE, and its mounts get no mappings; no handler is consulted.
func TestHostUsersLeftOutOrTrueSendModeNode(t *testing.T) {
	f, _ := usernsFixture(t)
	tr := true
	for _, hu := range []*bool{nil, &tr} {
		pod := hostUsersPod(hu)
		sb, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "busybox", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []*runtimeapi.UserNamespace{sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions, cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions} {
			if u.GetMode() != runtimeapi.NamespaceMode_NODE || u.Uids != nil || u.Gids != nil {
				t.Errorf("hostUsers %v: userns %v", hu, u)
			}
		}
		for _, m := range cfg.Mounts {
			if m.UidMappings != nil || m.GidMappings != nil {
				t.Errorf("hostUsers %v: mount %s has mappings", hu, m.ContainerPath)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(f.m.RootDir, "pods", "uid-1", "userns")); !os.IsNotExist(err) {
		t.Fatalf("a host-users pod has a range: %v", err)
	}
}

// TestHostUsersFalseWithoutAManagerIsRefused: a runtime manager built without the user namespace
// manager refuses the pod rather than run it with the host's IDs.
func TestHostUsersFalseWithoutAManagerIsRefused(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	if err := f.sync(hostUsersPod(new(bool))); err == nil || !strings.Contains(err.Error(), "spec.hostUsers: false") {
		t.Fatalf("sync: %v", err)
	}
	if len(f.cri.Sandboxes()) != 0 {
		t.Fatal("a sandbox was run")
	}
}
