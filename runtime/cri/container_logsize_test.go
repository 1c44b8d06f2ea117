package cri_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestContainerLogSizeMax runs a container that writes without end and nobody rotating its log:
// conmon must keep the file under the cap, starting it afresh (a new inode) when it would pass it.
func TestContainerLogSizeMax(t *testing.T) {
	const limit = 64 << 10
	e := runtimetest.Start(t, runtimetest.WithConfig(func(c *engine.Config) { c.ContainerLogMaxSize = limit }))
	pod := e.PodWithLogs("logcap")
	sb := e.RunPod(pod, "runc")
	id := e.RunContainer(sb, pod, runtimetest.ContainerConfig("spam", "yes", "a line of the endless writer"))
	path := filepath.Join(pod.LogDirectory, "spam.log")

	var first uint64
	wraps := 0
	deadline := time.Now().Add(time.Minute)
	for wraps < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("conmon started the log afresh %d times, want 2", wraps)
		}
		time.Sleep(time.Millisecond)
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not created yet
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > limit {
			t.Fatalf("the log is %d bytes, over the %d-byte cap", fi.Size(), limit)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		switch {
		case first == 0:
			first = ino
		case ino != first:
			wraps, first = wraps+1, ino
		}
	}
	st := e.Status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("the writer is %v, want it still running", st.State)
	}
}
