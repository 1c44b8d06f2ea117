package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestAgainstContainerd runs the same scenario on Debian's containerd: the API must work with any
// CRI runtime (containerd's streaming server, and its lack of ListPodSandboxStats in 1.6).
func TestAgainstContainerd(t *testing.T) {
	testutil.Require(t, "containerd", "runc")
	base, err := os.MkdirTemp("", "nlapictrd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	testutil.CheckNoLeaks(t, base)
	pause := testimage.MustBusybox(testimage.WithCmd("sleep", "2147483647"))
	reg := testimage.Serve(t, map[string]ggcrv1.Image{"busybox:latest": testimage.MustBusybox(), "pause:3.9": pause})

	// Both the test's registry and registry.k8s.io (for the sandbox image) lead to the loopback one.
	cmd, endpoint := crirt.StartContainerd(t, base, reg, "registry.k8s.io")
	t.Cleanup(func() {
		testutil.StopGroup(cmd, 20*time.Second)
		testutil.KillProcessesMentioning(base)
		testutil.UnmountUnder(base)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(base, "containerd.log"))
			t.Logf("containerd log:\n%s", b)
		}
	})
	apiScenario(t, endpoint, reg+"/busybox:latest", base, true)
}
