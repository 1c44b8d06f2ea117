package oomwatcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestMain lets the test binary be the process the kernel kills.
func TestMain(m *testing.M) {
	if os.Getenv("NODELET_TEST_OOM_CHILD") != "" {
		os.Stdin.Read(make([]byte, 1)) // allocate only once moved into the test's cgroup
		var keep [][]byte
		for i := 0; i < 1024; i++ { // up to 1 GiB, far past the cgroup's limit
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println(len(keep)) // not reached: the kernel kills the process first
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type syncRecorder struct {
	mu     sync.Mutex
	events []string
	added  chan struct{}
}

func (r *syncRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, reason+": "+fmt.Sprintf(format, args...))
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

func (r *syncRecorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// On the real machine: a process killed by the kernel for its cgroup's memory limit, outside the
// pods' cgroups, becomes a SystemOOM event naming it.
func TestSystemOOMFromARealKill(t *testing.T) {
	testutil.Require(t)
	cg := fmt.Sprintf("/nodelet-oom-test-%d", os.Getpid())
	dir := filepath.Join("/sys/fs/cgroup/memory", cg)
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		v2, dir = true, filepath.Join("/sys/fs/cgroup", cg)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.RemoveCgroupRootOrFail(t, cg) })
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte("33554432"), 0); err != nil {
		t.Fatal(err)
	}
	// Without swap in the limit the kernel could page out instead of killing.
	for _, f := range []string{"memory.memsw.limit_in_bytes", "memory.swap.max"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			v := "33554432"
			if f == "memory.swap.max" {
				v = "0"
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
				t.Fatal(err)
			}
		}
	}

	rec := &syncRecorder{added: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	seeked := make(chan struct{})
	go func() {
		done <- (&Watcher{Node: &v1.ObjectReference{Kind: "Node", Name: "n1"}, CgroupRoot: "/kubepods", Recorder: rec,
			seeked: seeked}).Run(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select { // a kill before the watcher reached the log's end would not be new to it
	case <-seeked:
	case err := <-done:
		t.Fatalf("watcher: %v", err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "NODELET_TEST_OOM_CHILD=1")
	start, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		child.Process.Kill()
		child.Wait()
		t.Fatal(err)
	}
	start.Write([]byte{'\n'})
	err = child.Wait()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child was not killed by the kernel: %v", err)
	}
	want := fmt.Sprintf("pid: %d", pid)
	deadline := time.After(30 * time.Second)
	for !rec.has(want) {
		select {
		case <-rec.added:
		case <-deadline:
			t.Fatalf("no SystemOOM event for pid %d; events: %v", pid, rec.events)
		}
	}
	if !rec.has("SystemOOM: System OOM encountered, victim process: ") {
		t.Errorf("events %v", rec.events)
	}
}
