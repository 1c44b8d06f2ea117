package csidriver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/nodelet/nodelet/test/harness/csidriver"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// The CSI sanity suite (kubernetes-csi/csi-test, which drivers run to check themselves against
// the spec) against the test driver: what stands in for a real driver behaves as one. Then
// nothing of it is left: no mount, no loop device, no volume file.
func TestSanity(t *testing.T) {
	testutil.Require(t, "losetup", "mkfs.ext4")
	dir := t.TempDir()
	t.Cleanup(func() { testutil.UnmountUnder(dir) })
	d := csidriver.Start(t, filepath.Join(dir, "driver"), "", "csi.sanity.test")
	cfg := sanity.NewTestConfig()
	cfg.Address = d.Endpoint
	cfg.TargetPath = filepath.Join(dir, "mount")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeExpandSize = 96 << 20
	cfg.IdempotentCount = 2
	sanity.Test(t, cfg)

	if left := testutil.MountsUnder(dir); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, "driver", "volumes", "*"))
	if len(imgs) != 0 {
		t.Errorf("volumes left: %v", imgs)
	}
	if _, err := os.Stat(cfg.TargetPath); !os.IsNotExist(err) {
		t.Errorf("the suite's target folder stays: %v", err)
	}
}
