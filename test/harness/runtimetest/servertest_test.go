package runtimetest_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func TestStartServesCRI(t *testing.T) {
	e := runtimetest.Start(t)
	v, err := e.Runtime.Version(e.Ctx(), &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "nodelet" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	img, err := e.Image.ImageStatus(e.Ctx(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: runtimetest.Image}})
	if err != nil || img.Image == nil {
		t.Fatalf("ImageStatus = %v, %v", img, err)
	}
	rfs, err := e.Config.Images.PrepareRootfs(e.Ctx(), "ab12", runtimetest.Image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rfs.Path, e.Config.Images.RemoveRootfs(e.Ctx(), "ab12"); err != nil {
		t.Fatal(err)
	}
	e.Restart()
	if _, err := e.Runtime.Version(e.Ctx(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
