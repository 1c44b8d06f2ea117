package cri_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestStatusRecursiveReadOnlyFeature: recursive read-only mounts are advertised for runc and
// crun, not for runsc, which refuses the rro option.
func TestStatusRecursiveReadOnlyFeature(t *testing.T) {
	e := runtimetest.Start(t)
	resp, err := e.Runtime.Status(e.Ctx(), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, h := range resp.RuntimeHandlers {
		got[h.Name] = h.GetFeatures().GetRecursiveReadOnlyMounts()
	}
	if !got["runc"] || !got["crun"] || !got[""] || got["runsc"] {
		t.Errorf("recursive read-only mounts advertised: %v; want runc, crun and the default, not runsc", got)
	}
}
