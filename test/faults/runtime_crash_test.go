package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// churnWorkers is how many clients create, start, stop and remove pods at once.
const churnWorkers = 20

// object is one sandbox or container as its client saw it.
type object struct {
	id      string
	removed bool // the remove call returned success
}

// ledger records what the clients were told, to hold the restarted daemon to it.
type ledger struct {
	mu         sync.Mutex
	sandboxes  map[string]*object // by pod name
	containers map[string]*object // by marker (the container's sleep argument)
	ops        atomic.Int64       // successful CRI calls
	killed     atomic.Bool        // set just before the SIGKILL: later errors are expected
	errs       []string           // errors before the kill
}

func (l *ledger) record(m map[string]*object, key, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[key] = &object{id: id}
}

func (l *ledger) removed(m map[string]*object, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[key].removed = true
}

// failed notes err and tells the worker to stop; only an error before the kill is a finding.
func (l *ledger) failed(what string, err error) {
	if l.killed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf("%s: %v", what, err))
}

// TestRuntimeSIGKILLDuringChurn kills `nodelet runtime` at a seeded moment of 20-way pod churn,
// restarts it on the same dirs and holds it to what its clients were told; then removes
// everything and checks that nothing is left. NODELET_FAULT_ROUNDS crashes in a row.
func TestRuntimeSIGKILLDuringChurn(t *testing.T) {
	rounds := envInt(t, "NODELET_FAULT_ROUNDS", 3)
	d := newDaemon(t, "runtime", "nlfault0", "10.254.30.0/24")
	d.start()
	d.pull()
	base := d.baseline(t)
	t.Logf("baseline: %s", base)
	seed := faultSeed(t)
	t.Logf("seed %d (NODELET_FAULT_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var marker atomic.Int64
	marker.Store(int64(rng.IntN(1000)) * 100000)
	for round := range rounds {
		l := &ledger{sandboxes: map[string]*object{}, containers: map[string]*object{}}
		killAt := int64(20 + rng.IntN(20*churnWorkers))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range churnWorkers {
			wg.Go(func() {
				churn(ctx, d.rs, l, fmt.Sprintf("r%d-w%d", round, w), &marker, rand.New(rand.NewPCG(seed, uint64(round*100+w+1))))
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		waitOps(l, killAt, done)
		l.killed.Store(true)
		d.restart()
		cancel()
		wg.Wait()
		t.Logf("round %d: killed after %d calls; %d sandboxes and %d containers created", round, l.ops.Load(), len(l.sandboxes), len(l.containers))
		for _, e := range l.errs {
			t.Errorf("round %d: before the kill: %s", round, e)
		}
		checkTruth(t, d, l)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
		for _, err := range removeAllPods(ctx2, d.rs) {
			t.Errorf("round %d: removing everything after the restart: %v", round, err)
		}
		cancel2()
		now, leaks := d.waitNoLeaks(base)
		t.Logf("round %d: after removing everything: %s", round, now)
		for _, s := range leaks {
			t.Errorf("round %d: %s", round, s)
		}
		if t.Failed() {
			return
		}
	}
}

// waitOps returns once the clients made n successful calls, or all of them stopped.
func waitOps(l *ledger, n int64, done <-chan struct{}) {
	for l.ops.Load() < n {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// churn runs pods through their life until ctx ends or a call fails. One pod in three is left
// running, so the crash finds live containers too.
func churn(ctx context.Context, rs runtimeapi.RuntimeServiceClient, l *ledger, prefix string, marker *atomic.Int64, rng *rand.Rand) {
	call := func(what string, f func(context.Context) error) bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := f(cctx); err != nil {
			l.failed(what, err)
			return false
		}
		l.ops.Add(1)
		return true
	}
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "faults", Uid: name},
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD}}},
		}
		var sb, ctr string
		if !call("run sandbox "+name, func(ctx context.Context) error {
			r, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err == nil {
				sb = r.PodSandboxId
				l.record(l.sandboxes, name, sb)
			}
			return err
		}) {
			return
		}
		mark := strconv.FormatInt(marker.Add(1), 10)
		if !call("create container "+mark, func(ctx context.Context) error {
			r, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, SandboxConfig: cfg,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c" + mark},
					Image: &runtimeapi.ImageSpec{Image: image}, Command: []string{"sleep", mark}}})
			if err == nil {
				ctr = r.ContainerId
				l.record(l.containers, mark, ctr)
			}
			return err
		}) {
			return
		}
		if !call("start "+ctr, func(ctx context.Context) error {
			_, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr})
			return err
		}) {
			return
		}
		if rng.IntN(3) == 0 {
			continue
		}
		ok := call("stop "+ctr, func(ctx context.Context) error {
			_, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr, Timeout: 0})
			return err
		}) && call("remove "+ctr, func(ctx context.Context) error {
			_, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctr})
			if err == nil {
				l.removed(l.containers, mark)
			}
			return err
		}) && call("stop sandbox "+sb, func(ctx context.Context) error {
			_, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
			return err
		}) && call("remove sandbox "+sb, func(ctx context.Context) error {
			_, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
			if err == nil {
				l.removed(l.sandboxes, name)
			}
			return err
		})
		if !ok {
			return
		}
	}
}

// checkTruth holds the restarted daemon to the truth: a container is RUNNING exactly when its one
// process runs, nothing removed came back, nothing is listed twice, and whatever the clients made
// that is not listed is wholly gone.
func checkTruth(t *testing.T, d *daemon, l *ledger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctrs, err := d.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatalf("list containers after restart: %v", err)
	}
	sbs, err := d.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("list sandboxes after restart: %v", err)
	}
	procs := sleepers()
	listed := map[string]bool{}
	for _, c := range ctrs.Containers {
		listed[c.Id] = true
		mark := strings.TrimPrefix(c.GetMetadata().GetName(), "c")
		st, err := d.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: true})
		if err != nil {
			t.Errorf("container %s (sleep %s) listed but its status fails: %v", c.Id, mark, err)
			continue
		}
		running := st.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		n := len(procs[mark])
		switch {
		case n > 1:
			t.Errorf("container %s (sleep %s) runs %d times: pids %v", c.Id, mark, n, procs[mark])
		case running && n == 0:
			t.Errorf("container %s (sleep %s) reported RUNNING but no process runs it", c.Id, mark)
		case !running && n == 1:
			t.Errorf("container %s (sleep %s) reported %v but its process %d runs", c.Id, mark, st.Status.State, procs[mark][0])
		}
		if running && n == 1 {
			if pid := infoPid(st.Info); pid != 0 && pid != procs[mark][0] {
				t.Errorf("container %s reports pid %d, its process is %d", c.Id, pid, procs[mark][0])
			}
		}
	}
	names := map[string]int{}
	for _, sb := range sbs.Items {
		listed[sb.Id] = true
		names[sb.GetMetadata().GetName()]++
	}
	for n, k := range names {
		if k > 1 {
			t.Errorf("pod %s has %d sandboxes", n, k)
		}
	}
	paths := strings.Join(d.holdings().Paths, "\n")
	mounts := strings.Join(d.holdings().Mounts, "\n")
	gone := func(kind, key string, o *object) {
		if listed[o.id] && o.removed {
			t.Errorf("%s %s (%s) was removed but is listed after the restart", kind, o.id, key)
		}
		if listed[o.id] || o.removed {
			return
		}
		if strings.Contains(paths, o.id) || strings.Contains(mounts, o.id) {
			t.Errorf("%s %s (%s) is not listed after the restart but is half there: %s", kind, o.id, key, pathsWith(paths+"\n"+mounts, o.id))
		}
		if kind == "container" && len(procs[key]) > 0 {
			t.Errorf("container %s (sleep %s) is not listed after the restart but runs: pids %v", o.id, key, procs[key])
		}
	}
	for k, o := range l.containers {
		gone("container", k, o)
	}
	for k, o := range l.sandboxes {
		gone("sandbox", k, o)
	}
}

// sleepers maps each container marker to the pids of `sleep MARKER` processes on the host.
func sleepers() map[string][]int {
	out := map[string][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) == 2 && args[0] == "sleep" {
			out[args[1]] = append(out[args[1]], pid)
		}
	}
	return out
}

// infoPid reads the pid from a verbose ContainerStatus, 0 when it has none.
func infoPid(info map[string]string) int {
	var v struct {
		Pid int `json:"pid"`
	}
	json.Unmarshal([]byte(info["info"]), &v)
	return v.Pid
}

func pathsWith(all, id string) string {
	var out []string
	for _, p := range strings.Split(all, "\n") {
		if strings.Contains(p, id) {
			out = append(out, p)
			if len(out) == 5 {
				break
			}
		}
	}
	return strings.Join(out, ", ")
}
