package kuberuntime

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/fakecri"
)

// TestRuntimeCgroupDriver: as the kubelet 1.31+, the agent asks the runtime for its cgroup driver;
// one that places containers with systemd cannot run the pods whose cgroups the agent keeps with
// cgroupfs, and is refused; a runtime that does not answer is taken at the configuration's word.
func TestRuntimeCgroupDriver(t *testing.T) {
	for _, tc := range []struct {
		name        string
		driver      *runtimeapi.CgroupDriver
		checkDriver bool
		wantErr     string
	}{
		{name: "cgroupfs", driver: new(runtimeapi.CgroupDriver_CGROUPFS), checkDriver: true},
		{name: "systemd", driver: new(runtimeapi.CgroupDriver_SYSTEMD), checkDriver: true,
			wantErr: "container runtime fakecri uses the systemd cgroup driver (its RuntimeConfig says so)"},
		{name: "not answered", checkDriver: true},
		{name: "systemd, no pods cgroup kept", driver: new(runtimeapi.CgroupDriver_SYSTEMD)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cri := fakecri.Start(t)
			if tc.driver != nil {
				cri.SetCgroupDriver(*tc.driver)
			}
			r := NewRuntimeName(cri.Runtime(), "fake", tc.checkDriver, slog.Default())
			err := r.Run(context.Background())
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Run: %v, want %q", err, tc.wantErr)
			}
			if r.Get() != "fakecri" {
				t.Errorf("name %q", r.Get())
			}
		})
	}
}
