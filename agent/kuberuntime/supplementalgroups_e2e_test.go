package kuberuntime

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestSupplementalGroupsPolicyOnTheRealRuntime: the busybox image's /etc/group makes user 1000 a
// member of group 2000. Merge (the default) keeps that membership, Strict drops it; either way
// the process's groups are what the runtime reports as the container's user, which the status
// carries.
func TestSupplementalGroupsPolicyOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:groups", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	ctx := context.Background()
	for _, tc := range []struct {
		policy *v1.SupplementalGroupsPolicy
		want   []int64
	}{
		{nil, []int64{1000, 2000, 3000}},
		{ptrTo(v1.SupplementalGroupsPolicyMerge), []int64{1000, 2000, 3000}},
		{ptrTo(v1.SupplementalGroupsPolicyStrict), []int64{1000, 3000}},
	} {
		name := "unset"
		if tc.policy != nil {
			name = string(*tc.policy)
		}
		t.Run(name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.UID = types.UID("uid-e2e-groups-" + strings.ToLower(name))
			pod.Spec.HostNetwork = true
			pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptrTo(int64(1000)), RunAsGroup: ptrTo(int64(1000)),
				SupplementalGroups: []int64{3000}, SupplementalGroupsPolicy: tc.policy}
			pod.Spec.Containers[0].Image = image
			pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
			t.Cleanup(func() {
				if st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
					zero := int64(0)
					m.KillPod(ctx, pod, st, &zero)
					m.RemovePod(ctx, st)
				}
			})
			st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SyncPod(ctx, pod, st); err != nil {
				t.Fatal(err)
			}
			if st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err != nil {
				t.Fatal(err)
			}
			cs := st.FindContainerStatusByName("app")
			if cs == nil || cs.User == nil || cs.User.Linux == nil {
				t.Fatalf("container status %+v has no user", cs)
			}
			if u := cs.User.Linux; u.UID != 1000 || u.GID != 1000 || !slices.Equal(u.SupplementalGroups, tc.want) {
				t.Errorf("reported user %+v, want uid 1000 gid 1000 groups %v", u, tc.want)
			}
			got := strings.Fields(rt.Exec(t, cs.ID, "id", "-G"))
			var want []string
			for _, g := range tc.want {
				want = append(want, strconv.FormatInt(g, 10))
			}
			if !slices.Equal(got, want) {
				t.Errorf("id -G in the container: %v, want %v", got, want)
			}
		})
	}
}
