package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// The user the runtime reports for a container's latest attempt is its status's user.
func TestGenerateReportsContainerUser(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a", "b")
	a := c("a", kubecontainer.StateRunning, 0, 0)
	a.User = &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 3000}}}
	s := Generate(pod, ps(a), v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Now()})
	u := s.ContainerStatuses[0].User
	if u == nil || u.Linux == nil || u.Linux.UID != 1000 || len(u.Linux.SupplementalGroups) != 2 {
		t.Errorf("user %+v", u)
	}
	if s.ContainerStatuses[1].User != nil {
		t.Errorf("container not made yet has a user: %+v", s.ContainerStatuses[1].User)
	}
}
