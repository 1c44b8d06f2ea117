package userns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// handlers is a fixed answer per handler name; a name it lacks is unknown.
type handlers map[string]bool

func (h handlers) SupportsUserNamespaces(_ context.Context, name string) (bool, error) {
	v, ok := h[name]
	if !ok {
		return false, errors.New("the handler " + name + " is not known")
	}
	return v, nil
}

func usernsPod(uid string) *v1.Pod {
	f := false
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{HostUsers: &f}}
}

func newManager(t *testing.T, root string, cfg Config) *Manager {
	t.Helper()
	cfg.RootDir = root
	if cfg.Handlers == nil {
		cfg.Handlers = handlers{"": true}
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func podRange(t *testing.T, m *Manager, pod *v1.Pod) uint32 {
	t.Helper()
	u, err := m.GetOrCreateUserNamespaceMappings(context.Background(), pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if u.Mode != runtimeapi.NamespaceMode_POD || len(u.Uids) != 1 || len(u.Gids) != 1 {
		t.Fatalf("user namespace %v", u)
	}
	for _, ms := range [][]*runtimeapi.IDMapping{u.Uids, u.Gids} {
		if ms[0].ContainerId != 0 || ms[0].Length != IDsPerPod || ms[0].HostId != u.Uids[0].HostId {
			t.Fatalf("mappings %v", u)
		}
	}
	return u.Uids[0].HostId
}

// TestRangesAreDisjointAndAboveTheHostsIDs: every hostUsers:false pod gets 65536 IDs of its own,
// none of the host's first 65536 and none another pod holds, recorded in pods/<uid>/userns in the
// kubelet's format; asking again gives the same range.
func TestRangesAreDisjointAndAboveTheHostsIDs(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 110})
	seen := map[uint32]string{}
	for i := 0; i < 120; i++ {
		uid := "pod-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		first := podRange(t, m, usernsPod(uid))
		if first < IDsPerPod || first%IDsPerPod != 0 || uint64(first)+IDsPerPod > maxHostID {
			t.Fatalf("pod %s got range %d", uid, first)
		}
		if other, dup := seen[first]; dup {
			t.Fatalf("pods %s and %s both got %d", other, uid, first)
		}
		seen[first] = uid
		if again := podRange(t, m, usernsPod(uid)); again != first {
			t.Fatalf("pod %s: %d then %d", uid, first, again)
		}
	}
	var first uint32
	for f, uid := range seen {
		if uid == "pod-a" {
			first = f
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "pods", "pod-a", "userns"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"uidMappings":[{"hostId":` + itoa(first) + `,"containerId":0,"length":65536}],"gidMappings":[{"hostId":` + itoa(first) + `,"containerId":0,"length":65536}]}`
	if string(b) != want {
		t.Fatalf("checkpoint %s, want %s", b, want)
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// TestHostUsersLeftOutOrTrueUseTheHostsNamespace: the node's user namespace, as the kubelet
// sends it (mode NODE), and nothing recorded or asked of the runtime.
func TestHostUsersLeftOutOrTrueUseTheHostsNamespace(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 1, Handlers: handlers{}})
	tr := true
	for _, hu := range []*bool{nil, &tr} {
		pod := usernsPod("host")
		pod.Spec.HostUsers = hu
		u, err := m.GetOrCreateUserNamespaceMappings(context.Background(), pod, "")
		if err != nil || u.Mode != runtimeapi.NamespaceMode_NODE || len(u.Uids) != 0 {
			t.Fatalf("hostUsers %v: %v %v", hu, u, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pods")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("something was recorded: %v", err)
	}
}

// TestRefusedWhereTheHandlerHasNoUserNamespaces: the kubelet's messages, and no range is taken.
func TestRefusedWhereTheHandlerHasNoUserNamespaces(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 1, FirstID: IDsPerPod, Length: IDsPerPod,
		Handlers: handlers{"": false, "kata": false, "runc": true}})
	for handler, want := range map[string]string{
		"":     "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
		"kata": "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces",
		"nosuch": "can't set `spec.hostUsers: false`, RuntimeClass handler \"nosuch\" does not support user namespaces: " +
			"the handler nosuch is not known",
	} {
		_, err := m.GetOrCreateUserNamespaceMappings(context.Background(), usernsPod("refused"), handler)
		if err == nil || err.Error() != want {
			t.Errorf("handler %q: %v, want %q", handler, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "refused", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused pod has a checkpoint: %v", err)
	}
	// The only range is still free.
	if _, err := m.GetOrCreateUserNamespaceMappings(context.Background(), usernsPod("ok"), "runc"); err != nil {
		t.Fatal(err)
	}
}

// TestRangesSurviveARestart: a new manager over the same root dir gives each pod the range its
// checkpoint holds and never gives that range to another pod, even where its search starts there.
func TestRangesSurviveARestart(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 4, FirstID: 4 * IDsPerPod, Length: 4 * IDsPerPod})
	a, b := podRange(t, m, usernsPod("a")), podRange(t, m, usernsPod("b"))

	m2 := newManager(t, root, Config{MaxPods: 4, FirstID: 4 * IDsPerPod, Length: 4 * IDsPerPod})
	if got := podRange(t, m2, usernsPod("b")); got != b {
		t.Fatalf("after restart pod b has %d, had %d", got, b)
	}
	m2.pick = func(int) int { return int(a/IDsPerPod) - 4 }
	c := podRange(t, m2, usernsPod("c"))
	if c == a || c == b {
		t.Fatalf("pod c got %d, held by a (%d) or b (%d)", c, a, b)
	}
	if got := podRange(t, m2, usernsPod("a")); got != a {
		t.Fatalf("after restart pod a has %d, had %d", got, a)
	}
}

// TestRangesRunOutAndAreFreed: with as many ranges as pods, the next pod is refused until one
// is released (terminated) or its pod is gone (housekeeping), and its checkpoint goes with it.
func TestRangesRunOutAndAreFreed(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 2, FirstID: IDsPerPod, Length: 2 * IDsPerPod})
	a := podRange(t, m, usernsPod("a"))
	podRange(t, m, usernsPod("b"))
	_, err := m.GetOrCreateUserNamespaceMappings(context.Background(), usernsPod("c"), "")
	if err == nil || !strings.Contains(err.Error(), "could not find an empty slot to allocate a user namespace") {
		t.Fatalf("third pod: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "c", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused pod c has a checkpoint: %v", err)
	}
	m.Release("a")
	if _, err := os.Stat(filepath.Join(root, "pods", "a", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("released pod a keeps its checkpoint: %v", err)
	}
	if got := podRange(t, m, usernsPod("c")); got != a {
		t.Fatalf("pod c got %d, the freed range is %d", got, a)
	}

	// Housekeeping: b's folder is left with its checkpoint, c's went with its pod; neither is kept.
	if err := os.RemoveAll(filepath.Join(root, "pods", "c")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "pods", "unrelated"), 0o750)
	if err := m.CleanupOrphans(func(uid types.UID) bool { return uid == "unrelated" }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "b", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan b keeps its checkpoint: %v", err)
	}
	podRange(t, m, usernsPod("d"))
	podRange(t, m, usernsPod("e"))
}

// TestCheckpointRewrittenWhileHeld: a pod whose checkpoint went while it holds a range keeps that
// range, recorded again, rather than getting a second one.
func TestCheckpointRewrittenWhileHeld(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root, Config{MaxPods: 2, FirstID: IDsPerPod, Length: 2 * IDsPerPod})
	a := podRange(t, m, usernsPod("a"))
	os.Remove(filepath.Join(root, "pods", "a", "userns"))
	if got := podRange(t, m, usernsPod("a")); got != a {
		t.Fatalf("pod a got %d, holds %d", got, a)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "a", "userns")); err != nil {
		t.Fatal(err)
	}
	podRange(t, m, usernsPod("b")) // the second range is still free
}

// TestBadCheckpointsFailTheStart: a checkpoint that is not the agent's, claims a taken or foreign
// range, or is not a regular file stops the start (going on could give two pods the same IDs);
// a FIFO does not block it.
func TestBadCheckpointsFailTheStart(t *testing.T) {
	cfg := Config{MaxPods: 2, FirstID: IDsPerPod, Length: 2 * IDsPerPod, Handlers: handlers{}}
	valid := func(host uint32) string {
		return `{"uidMappings":[{"hostId":` + itoa(host) + `,"containerId":0,"length":65536}],"gidMappings":[{"hostId":` + itoa(host) + `,"containerId":0,"length":65536}]}`
	}
	for name, files := range map[string]map[string]string{
		"not json":         {"a": "{"},
		"two mappings":     {"a": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":1},{"hostId":65537,"containerId":1,"length":1}],"gidMappings":[]}`},
		"uids differ":      {"a": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`},
		"root not mapped":  {"a": `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`},
		"host root":        {"a": valid(0)},
		"out of range":     {"a": valid(3 * IDsPerPod)},
		"unaligned":        {"a": valid(IDsPerPod + 1)},
		"same range twice": {"a": valid(IDsPerPod), "b": valid(IDsPerPod)},
		"too large":        {"a": strings.Repeat(" ", maxCheckpointBytes+1)},
	} {
		root := t.TempDir()
		for uid, content := range files {
			os.MkdirAll(filepath.Join(root, "pods", uid), 0o750)
			os.WriteFile(filepath.Join(root, "pods", uid, "userns"), []byte(content), 0o600)
		}
		cfg.RootDir = root
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: started", name)
		}
	}

	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "pods", "a"), 0o750)
	if err := syscall.Mkfifo(filepath.Join(root, "pods", "a", "userns"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.RootDir = root
	done := make(chan error, 1)
	go func() { _, err := New(cfg); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FIFO checkpoint: %v", err)
		}
	case <-time.After(30 * time.Second): // guards a hang only
		t.Fatal("a FIFO checkpoint blocked the start")
	}
}

// TestRangesBoundedByTheHostsIDs: the kubelet's default IDs hold 65534 usable ranges (the last
// one it would count reaches (uid_t)-1, which the kernel refuses to map), and a maxPods beyond
// the ranges, or IDs that are not whole ranges above the host's first 65536, refuse to start.
func TestRangesBoundedByTheHostsIDs(t *testing.T) {
	m := newManager(t, t.TempDir(), Config{MaxPods: 110, FirstID: defaultFirstID, Length: defaultIDLength})
	if m.count != 65534 || m.off != 1 {
		t.Fatalf("%d ranges from index %d", m.count, m.off)
	}
	m.pick = func(n int) int { return n - 1 }
	if first := podRange(t, m, usernsPod("last")); uint64(first)+IDsPerPod > maxHostID {
		t.Fatalf("last range %d reaches (uid_t)-1", first)
	}
	for name, cfg := range map[string]Config{
		"too many pods": {MaxPods: 3, FirstID: IDsPerPod, Length: 2 * IDsPerPod},
		"host root":     {MaxPods: 1, FirstID: 0, Length: 2 * IDsPerPod},
		"unaligned":     {MaxPods: 1, FirstID: IDsPerPod + 1, Length: 2 * IDsPerPod},
		"partial range": {MaxPods: 1, FirstID: IDsPerPod, Length: IDsPerPod + 1},
	} {
		cfg.RootDir, cfg.Handlers = t.TempDir(), handlers{}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: started", name)
		}
	}
}

func TestParseGetsubids(t *testing.T) {
	first, n, err := parseGetsubids("0: kubelet 65536 2147483648\n")
	if err != nil || first != 65536 || n != 2147483648 {
		t.Fatalf("%d %d %v", first, n, err)
	}
	for _, bad := range []string{"", "0: kubelet 65536\n", "0: kubelet 1 2\n1: kubelet 3 4\n", "0: kubelet x 2\n", "0: kubelet 1 99999999999\n"} {
		if _, _, err := parseGetsubids(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// statusStub answers Status with fixed handlers.
type statusStub struct {
	resp *runtimeapi.StatusResponse
	err  error
}

func (s statusStub) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	return s.resp, s.err
}

// TestRuntimeHandlers reads the feature as the kubelet does: no handlers listed (containerd 1.6)
// is no support, an unlisted handler an error.
func TestRuntimeHandlers(t *testing.T) {
	listed := &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{
		{Name: ""}, {Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}}}}
	for _, c := range []struct {
		resp    *runtimeapi.StatusResponse
		handler string
		want    bool
		wantErr bool
	}{
		{&runtimeapi.StatusResponse{}, "", false, false},
		{listed, "", false, false},
		{listed, "runc", true, false},
		{listed, "kata", false, true},
	} {
		got, err := RuntimeHandlers{Runtime: statusStub{resp: c.resp}}.SupportsUserNamespaces(context.Background(), c.handler)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("handler %q of %v: %v %v", c.handler, c.resp, got, err)
		}
	}
	if _, err := (RuntimeHandlers{Runtime: statusStub{err: errors.New("down")}}).SupportsUserNamespaces(context.Background(), ""); err == nil {
		t.Error("a runtime that is down supports user namespaces")
	}
}

// The "kubelet" user is found by its name field only, as a static build's lookup finds it; a
// missing passwd file is a host without the user, a file that is not regular an error.
func TestHasUser(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/sh\n#kubelet:x:1:1::/:/bin/false\nkubeletx:x:2:2::/:/bin/false\n"), 0o644)
	if ok, err := hasUser(passwd, "kubelet"); ok || err != nil {
		t.Fatalf("no kubelet line: %v, %v", ok, err)
	}
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/sh\nkubelet:x:999:999::/var/lib/kubelet:/usr/sbin/nologin\n"), 0o644)
	if ok, err := hasUser(passwd, "kubelet"); !ok || err != nil {
		t.Fatalf("kubelet line: %v, %v", ok, err)
	}
	if ok, err := hasUser(filepath.Join(dir, "missing"), "kubelet"); ok || err != nil {
		t.Fatalf("missing file: %v, %v", ok, err)
	}
	if _, err := hasUser(dir, "kubelet"); err == nil {
		t.Fatal("a folder read as a passwd file")
	}
}
