package gc

import (
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/images"
)

// EventRecorder records events on the node (record.EventRecorder).
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// imageGCOutcome turns failed image collections into the node events the kubelet records:
// FreeDiskSpaceFailed each time a collection could not free enough, ImageGCFailed when one fails
// right after another failed (a single failure may be a pull racing the collection).
type imageGCOutcome struct {
	node     *v1.ObjectReference
	recorder EventRecorder
	failed   bool
}

func (o *imageGCOutcome) record(err error) {
	if err == nil {
		o.failed = false
		return
	}
	if errors.Is(err, images.ErrNotEnoughFreed) {
		o.recorder.Eventf(o.node, v1.EventTypeWarning, "FreeDiskSpaceFailed", "%v", err)
	}
	if o.failed {
		o.recorder.Eventf(o.node, v1.EventTypeWarning, "ImageGCFailed", "%v", err)
	}
	o.failed = true
}
