package eviction

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestMain lets the test binary be the process whose memory a real threshold watches.
func TestMain(m *testing.M) {
	if n := os.Getenv("NODELET_TEST_ALLOCATE_MIB"); n != "" {
		allocate(n)
		return
	}
	os.Exit(m.Run())
}

// allocate waits for a line on stdin, touches n MiB, says "done", and holds it until stdin closes.
func allocate(n string) {
	mib, _ := strconv.Atoi(n)
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	buf := make([]byte, mib<<20)
	for i := 0; i < len(buf); i += os.Getpagesize() {
		buf[i] = 1
	}
	fmt.Println("done")
	in.ReadString('\n')
	buf[len(buf)-1] = 2 // keep buf alive until here
}

func memcgV1() bool {
	return !cgroupfs.Host().Unified()
}

// On the real machine: a threshold armed above a cgroup's usage fires when a process in it
// allocates past it, and not before.
func TestMemcgThresholdFiresOnRealCgroup(t *testing.T) {
	testutil.Require(t)
	if !memcgV1() {
		// What the agent does on cgroup v2: refuse kernelMemcgNotification, saying why.
		err := (&Machine{}).CheckMemcgNotification()
		if err == nil || !strings.Contains(err.Error(), "cgroup v2") {
			t.Fatalf("on cgroup v2 memcg notification must be refused naming cgroup v2, got %v", err)
		}
		return
	}
	if err := (&Machine{}).CheckMemcgNotification(); err != nil {
		t.Fatalf("cgroup v1 with a memory controller: %v", err)
	}
	dir := filepath.Join("/sys/fs/cgroup/memory", fmt.Sprintf("nodelet-memcg-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "NODELET_TEST_ALLOCATE_MIB=128")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
		testutil.RemoveCgroupTree(dir)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("test cgroup %s left behind: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(child.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	usage, err := readInt(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	th, err := ArmMemcgThreshold(dir, usage+32<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	fired := make(chan error, 1)
	go func() { fired <- th.Wait() }()
	select {
	case err := <-fired:
		t.Fatalf("the threshold fired before the cgroup grew: %v", err)
	default:
	}
	fmt.Fprintln(stdin, "go")
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("allocating child: %q %v", line, err)
	}
	select {
	case err := <-fired:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(30 * time.Second):
		now, _ := readInt(filepath.Join(dir, "memory.usage_in_bytes"))
		t.Fatalf("usage went from %d to %d past the level %d, but the threshold did not fire", usage, now, th.Level)
	}
	// Closed, a threshold's Wait returns at once.
	th2, err := ArmMemcgThreshold(dir, usage+1<<30)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- th2.Wait() }()
	th2.Close()
	if err := <-done; err == nil {
		t.Fatal("Wait on a closed threshold returned nil, as if it had fired")
	}
}

// The level armed for memory.available is MemTotal − available + inactive_file, on the root
// memory cgroup; a made-up tree shows the arithmetic.
func TestNotifyMemoryBelowLevel(t *testing.T) {
	root := t.TempDir()
	memcg := filepath.Join(root, "sys/fs/cgroup/memory")
	for path, content := range map[string]string{
		"proc/meminfo":                               "MemTotal:       1048576 kB\nMemFree:         524288 kB\n",
		"sys/fs/cgroup/memory/memory.stat":           "cache 1\ntotal_inactive_file 104857600\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes": "600000000\n",
		"sys/fs/cgroup/memory/cgroup.event_control":  "",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &Machine{Root: root, PodsCgroup: "/kubepods"}
	th, err := m.NotifyMemoryBelow(SignalMemoryAvailable, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	want := int64(1<<30 - 100<<20 + 104857600)
	if th.Level != want {
		t.Errorf("level %d, want %d", th.Level, want)
	}
	b, _ := os.ReadFile(filepath.Join(memcg, "cgroup.event_control"))
	if f := strings.Fields(string(b)); len(f) != 3 || f[2] != strconv.FormatInt(want, 10) {
		t.Errorf("cgroup.event_control got %q", b)
	}
	// The pods' cgroup: its limit less the level, plus its own inactive_file.
	for path, content := range map[string]string{
		"memory.limit_in_bytes": "536870912\n",
		"memory.usage_in_bytes": "1\n",
		"memory.stat":           "total_inactive_file 1048576\n",
		"cgroup.event_control":  "",
	} {
		os.MkdirAll(filepath.Join(memcg, "kubepods"), 0o755)
		if err := os.WriteFile(filepath.Join(memcg, "kubepods", path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	th, err = m.NotifyMemoryBelow(SignalAllocatableMemoryAvailable, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	if want := int64(512<<20 - 100<<20 + 1<<20); th.Level != want {
		t.Errorf("pods' level %d, want %d", th.Level, want)
	}
	os.WriteFile(filepath.Join(memcg, "kubepods", "memory.limit_in_bytes"), []byte("9223372036854771712\n"), 0o644)
	if _, err := m.NotifyMemoryBelow(SignalAllocatableMemoryAvailable, 100<<20); err == nil || !strings.Contains(err.Error(), "no memory limit") {
		t.Errorf("unlimited pods' cgroup: %v", err)
	}
	os.Remove(filepath.Join(memcg, "cgroup.event_control"))
	if _, err := m.NotifyMemoryBelow(SignalMemoryAvailable, 100<<20); err == nil || !strings.Contains(err.Error(), "cgroup v1 memory controller") {
		t.Errorf("without cgroup.event_control: %v", err)
	}
}

type fakeNotifier struct {
	levels chan string
	fds    chan int
}

func (f *fakeNotifier) NotifyMemoryBelow(sig Signal, available int64) (*MemcgThreshold, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f.levels <- fmt.Sprintf("%s<%dMi", sig, available/mi)
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f.fds <- dup // the test signals through its own copy, as the kernel would through its reference
	return &MemcgThreshold{Level: available, efd: os.NewFile(uintptr(fd), "fake")}, nil
}

// With kernelMemcgNotification the manager arms at its highest memory threshold and checks the
// signals as soon as the threshold is crossed, not at the next tick.
func TestManagerChecksAtOnceWhenMemoryThresholdCrossed(t *testing.T) {
	meas := &countingMeasurer{fakeMeasurer: fakeMeasurer{obs: Observations{
		SignalMemoryAvailable:            {Available: 900 * mi, Capacity: 1000 * mi},
		SignalAllocatableMemoryAvailable: {Available: 400 * mi, Capacity: 500 * mi}}},
		calls: make(chan struct{}, 100)}
	ts, err := ParseThresholds(Settings{Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "50%"},
		Soft: map[string]string{"memory.available": "20%"}, SoftGracePeriod: map[string]string{"memory.available": "1m"}})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err = WithAllocatable(ts, true); err != nil {
		t.Fatal(err)
	}
	n := &fakeNotifier{levels: make(chan string, 10), fds: make(chan int, 10)}
	m := New(Config{Thresholds: ts, MonitoringInterval: time.Hour, KernelMemcgNotification: true},
		Deps{Measurer: meas, Notifier: n, ActivePods: func() []*v1.Pod { return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	<-meas.calls
	// The highest of each memory signal: 20% of 1000Mi for the node, the hard 100Mi copied to
	// the pods' cgroup.
	for _, want := range []string{"memory.available<200Mi", "allocatableMemory.available<100Mi"} {
		if got := <-n.levels; got != want {
			t.Fatalf("armed %s, want %s", got, want)
		}
	}
	unix.Close(<-n.fds)
	fd := <-n.fds // the pods' cgroup crossing its level
	defer unix.Close(fd)
	unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	select {
	case <-meas.calls:
	case <-time.After(30 * time.Second):
		t.Fatal("no check of the signals after the threshold was crossed (the tick is an hour away)")
	}
	if got := <-n.levels; got != "memory.available<200Mi" {
		t.Fatalf("re-armed %s", got)
	}
}

type countingMeasurer struct {
	fakeMeasurer
	calls chan struct{}
}

func (c *countingMeasurer) Measure(ctx context.Context) (Observations, error) {
	c.calls <- struct{}{}
	return c.fakeMeasurer.Measure(ctx)
}

// readInt reads a cgroup file holding one integer.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
