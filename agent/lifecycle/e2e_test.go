package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func freePort(t *testing.T) int { return testutil.FreePort(t) }

// TestHooksInRealContainer runs each hook kind against a busybox container on nodelet's runtime.
func TestHooksInRealContainer(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:hooks", nil)
	rt.Pull(t, image)
	port := freePort(t)
	p := rt.RunPod(t, "hooks", "uid-hooks", t.TempDir())
	id := rt.Start(t, p, "web", 0, image, []string{"sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 127.0.0.1:" + strconv.Itoa(port) + " -h /www"})
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	target := Target{ContainerID: id, Container: c, PodIP: "127.0.0.1"}
	r := &Runner{Exec: rt.RS}
	ctx := context.Background()

	if err := r.Run(ctx, target, &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo started > /tmp/poststart"}}}); err != nil {
		t.Fatal(err)
	}
	if out := rt.Exec(t, id, "cat", "/tmp/poststart"); out != "started\n" {
		t.Fatalf("postStart exec left %q", out)
	}
	err := r.Run(ctx, target, &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo nope >&2; exit 2"}}})
	if !errors.Is(err, ErrHook) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("failing exec hook: %v", err)
	}

	// httpd may need a moment to listen; the hook is retried only here, by the test.
	hook := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/index.html", Port: intstr.FromString("http")}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = r.Run(ctx, target, hook); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("httpGet hook: %v", err)
	}
	if err := r.Run(ctx, target, &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/missing", Port: intstr.FromString("http")}}); !errors.Is(err, ErrHook) {
		t.Fatalf("httpGet of a missing page: %v", err)
	}
	// A preStop sleep longer than the grace period ends with it.
	gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := r.Run(gctx, target, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 600}}); err != nil {
		t.Fatal(err)
	}
}
