package admission

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/agent/podvalidation"
)

// unsupportedFields rejects a pod from the API server that sets a field this node refuses rather
// than ignore (podvalidation.Unsupported; static pods were refused when read). The API server
// lets them through when its own feature gates are on; running the pod without them would be
// running something else than was asked.
func unsupportedFields(pod *v1.Pod) (Result, bool) {
	reason, errs := podvalidation.Unsupported(&pod.Spec, field.NewPath("spec"))
	if len(errs) == 0 {
		return Result{}, false
	}
	return Result{Reason: reason, Message: errs.ToAggregate().Error()}, true
}
