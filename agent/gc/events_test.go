package gc

import (
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/images"
)

type reasonRecorder struct{ reasons []string }

func (r *reasonRecorder) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

// A collection that cannot free enough says so on the node each time; ImageGCFailed needs two
// failures in a row, and a success in between starts counting again.
func TestImageGCFailuresBecomeNodeEvents(t *testing.T) {
	r := &reasonRecorder{}
	o := imageGCOutcome{node: &v1.ObjectReference{Kind: "Node", Name: "n"}, recorder: r}
	short := fmt.Errorf("%w: wanted 10 bytes, freed 2", images.ErrNotEnoughFreed)
	o.record(short)
	o.record(nil)
	o.record(errors.New("image service unavailable"))
	o.record(short)
	want := "FreeDiskSpaceFailed FreeDiskSpaceFailed ImageGCFailed"
	if got := fmt.Sprint(r.reasons); got != "["+want+"]" {
		t.Errorf("events = %s, want [%s]", got, want)
	}
}
