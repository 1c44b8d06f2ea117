package engine

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

// ListSandboxes lists the sandboxes f lets through (all with no filter).
func (s *Engine) ListSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	var all []*store.Sandbox
	if id := f.GetId(); id != "" {
		// An ID filter matches the full ID or a unique prefix of it, as crictl's short IDs.
		sb, err := s.sandboxes.Get(id)
		if err != nil {
			return nil
		}
		all = []*store.Sandbox{sb}
	} else {
		all = s.sandboxes.List()
	}
	out := []*runtimeapi.PodSandbox{}
	for _, sb := range all {
		if st := f.GetState(); st != nil && st.State != sb.State {
			continue
		}
		if !labelsMatch(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             sb.ID,
			Metadata:       sb.Config.GetMetadata(),
			State:          sb.State,
			CreatedAt:      sb.CreatedAt,
			Labels:         sb.Config.GetLabels(),
			Annotations:    sb.Config.GetAnnotations(),
			RuntimeHandler: sb.Handler,
		})
	}
	return out
}

// labelsMatch reports whether labels hold every pair of selector.
func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
