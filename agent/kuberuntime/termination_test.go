package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// terminationFixture runs one container with a termination message path and returns the host file
// mounted there and the container's ID.
func terminationFixture(t *testing.T, policy v1.TerminationMessagePolicy) (*fixture, *v1.Pod, string, string) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyNever, nil, "a")
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.Spec.Containers[0].TerminationMessagePolicy = policy
	f.mustSync(pod)
	id := f.cri.RunningContainer("a")
	var ann map[string]string
	for _, c := range f.cri.Containers() {
		if c.Id == id {
			ann = c.Annotations
		}
	}
	host, err := podpath.TerminationMessageFile(f.m.RootDir, pod.UID, "a", ann[AnnotationTerminationMessageFile])
	if err != nil {
		t.Fatalf("annotations %v: %v", ann, err)
	}
	return f, pod, host, id
}

func (f *fixture) message(pod *v1.Pod) string {
	f.t.Helper()
	st := f.status(pod)
	if len(st.ContainerStatuses) != 1 {
		f.t.Fatalf("statuses %v", st.ContainerStatuses)
	}
	return st.ContainerStatuses[0].Message
}

func TestTerminationMessageFileMountedAndReadBack(t *testing.T) {
	f, pod, host, id := terminationFixture(t, v1.TerminationMessageReadFile)
	fi, err := os.Lstat(host)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Fatalf("termination file %v %v", fi, err)
	}
	dir, err := os.Stat(filepath.Dir(host))
	if err != nil || dir.Mode().Perm()&0o007 != 0 {
		t.Fatalf("container dir %v %v: open to other users", dir, err)
	}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 1, "busybox", nil)
	if err != nil {
		t.Fatal(err)
	}
	last := cfg.Mounts[len(cfg.Mounts)-1]
	if last.ContainerPath != "/dev/termination-log" || last.Readonly || filepath.Dir(last.HostPath) != filepath.Dir(host) || last.HostPath == host {
		t.Fatalf("mount %v; want a new read-write file beside %s", last, host)
	}

	if got := f.message(pod); got != "" {
		t.Fatalf("running container has message %q", got)
	}
	if err := os.WriteFile(host, []byte("DONE"), 0); err != nil {
		t.Fatal(err)
	}
	f.cri.ExitContainer(id, 0)
	if got := f.message(pod); got != "DONE" {
		t.Fatalf("message %q, want DONE", got)
	}
	// A restarted agent knows the file only from what the runtime returns.
	m2 := NewManager(f.m.Deps)
	st, err := m2.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil || st.ContainerStatuses[0].Message != "DONE" {
		t.Fatalf("after restart: %v %v", st, err)
	}
}

func TestTerminationMessageHostileFile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 10000) + "END"
	cases := []struct {
		name    string
		replace func(host string) error
		want    func(msg string) bool
	}{
		{"symlink", func(h string) error { os.Remove(h); return os.Symlink(secret, h) },
			func(m string) bool {
				return strings.HasPrefix(m, "Error on reading termination log") && !strings.Contains(m, "secret")
			}},
		{"fifo", func(h string) error { os.Remove(h); return syscall.Mkfifo(h, 0o666) },
			func(m string) bool {
				return strings.HasPrefix(m, "Error on reading termination log: "+regularfile.ErrNotRegular.Error()) && !strings.Contains(m, "/")
			}},
		{"directory", func(h string) error { os.Remove(h); return os.Mkdir(h, 0o755) },
			func(m string) bool { return strings.HasPrefix(m, "Error on reading termination log") }},
		{"huge", func(h string) error { return os.WriteFile(h, []byte(huge), 0) },
			func(m string) bool { return len(m) == maxTerminationMessageBytes && strings.HasSuffix(m, "xEND") }},
		{"gone", os.Remove, func(m string) bool { return m == "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, pod, host, id := terminationFixture(t, v1.TerminationMessageReadFile)
			if err := tc.replace(host); err != nil {
				t.Fatal(err)
			}
			f.cri.ExitContainer(id, 1)
			done := make(chan string, 1)
			go func() { done <- f.message(pod) }()
			select {
			case got := <-done:
				if !tc.want(got) {
					t.Fatalf("message %q (%d bytes)", got, len(got))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("reading the termination message blocked")
			}
		})
	}
}

func TestTerminationMessageFallbackToLogs(t *testing.T) {
	f, pod, host, id := terminationFixture(t, v1.TerminationMessageFallbackToLogsOnError)
	logDir, _ := podpath.LogDir(f.m.PodLogsDir, pod.Namespace, pod.Name, pod.UID)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "2024-01-01T00:00:00.000000000Z stdout F line %d\n", i)
	}
	b.WriteString("2024-01-01T00:00:00.000000000Z stderr F " + strings.Repeat("y", 3000) + "\n")
	if err := os.WriteFile(filepath.Join(logDir, "a", "0.log"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f.cri.ExitContainer(id, 2)
	got := f.message(pod)
	if len(got) != maxTerminationMessageLogBytes || !strings.HasSuffix(got, "yyy\n") {
		t.Fatalf("message %d bytes %q…, want the log's last %d bytes", len(got), got[:min(len(got), 40)], maxTerminationMessageLogBytes)
	}

	// What the container wrote wins over its log.
	if err := os.WriteFile(host, []byte("from file"), 0); err != nil {
		t.Fatal(err)
	}
	if got := f.message(pod); got != "from file" {
		t.Fatalf("message %q", got)
	}
}

func TestTerminationMessageFallbackOnlyOnFailure(t *testing.T) {
	f, pod, _, id := terminationFixture(t, v1.TerminationMessageFallbackToLogsOnError)
	logDir, _ := podpath.LogDir(f.m.PodLogsDir, pod.Namespace, pod.Name, pod.UID)
	if err := os.WriteFile(filepath.Join(logDir, "a", "0.log"), []byte("2024-01-01T00:00:00Z stdout F hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.cri.ExitContainer(id, 0)
	if got := f.message(pod); got != "" {
		t.Fatalf("message %q after exit 0; want none", got)
	}
}

func TestTerminationMessageTailLines(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "2024-01-01T00:00:00Z stdout F l%03d\n", i)
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	m := NewManager(Deps{})
	got := m.logTail(context.Background(), &runtimeapi.ContainerStatus{LogPath: p}, labeledInfo{})
	if !strings.HasPrefix(got, "l020\n") || !strings.HasSuffix(got, "l099\n") || strings.Count(got, "\n") != maxTerminationMessageLogLines {
		t.Fatalf("tail %q", got)
	}
}
