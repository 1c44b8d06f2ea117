package kuberuntime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func boolPtr(b bool) *bool  { return &b }
func i64Ptr(i int64) *int64 { return &i }

func TestRunAsNonRoot(t *testing.T) {
	const podName = `"web_default(uid-1)"`
	cases := []struct {
		name      string
		imageUser string
		pod       *v1.PodSecurityContext
		container *v1.SecurityContext
		// wantMsg is the waiting message; "" means the container starts.
		wantMsg string
	}{
		{name: "not asked", imageUser: "0"},
		{name: "image uid 1000", imageUser: "1000", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)}},
		{name: "image uid:gid 1000:1000", imageUser: "1000:1000", container: &v1.SecurityContext{RunAsNonRoot: boolPtr(true)}},
		{name: "image root by uid", imageUser: "0", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg: "container has runAsNonRoot and image will run as root (pod: " + podName + ", container: app)"},
		{name: "image root by uid:gid", imageUser: "0:0", container: &v1.SecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg: "container has runAsNonRoot and image will run as root (pod: " + podName + ", container: app)"},
		{name: "image names no user", imageUser: "", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg: "container has runAsNonRoot and image will run as root (pod: " + podName + ", container: app)"},
		{name: "image user by name", imageUser: "nobody", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg: "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: " + podName + ", container: app)"},
		{name: "image user root by name", imageUser: "root", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg: "container has runAsNonRoot and image has non-numeric user (root), cannot verify user is non-root (pod: " + podName + ", container: app)"},
		{name: "explicit runAsUser 0", imageUser: "1000", container: &v1.SecurityContext{RunAsNonRoot: boolPtr(true), RunAsUser: i64Ptr(0)},
			wantMsg: "container's runAsUser breaks non-root policy (pod: " + podName + ", container: app)"},
		{name: "pod runAsUser 0 with container runAsNonRoot", imageUser: "1000", pod: &v1.PodSecurityContext{RunAsUser: i64Ptr(0)},
			container: &v1.SecurityContext{RunAsNonRoot: boolPtr(true)},
			wantMsg:   "container's runAsUser breaks non-root policy (pod: " + podName + ", container: app)"},
		{name: "runAsUser overrides a root image", imageUser: "0", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true), RunAsUser: i64Ptr(1000)}},
		{name: "container turns it off", imageUser: "0", pod: &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)},
			container: &v1.SecurityContext{RunAsNonRoot: boolPtr(false)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.cri.AddImage("busybox:latest")
			f.cri.SetImageUser("busybox:latest", c.imageUser)
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.SecurityContext = c.pod
			pod.Spec.Containers[0].SecurityContext = c.container
			err := f.sync(pod)
			created := slices.ContainsFunc(f.cri.Calls(), func(s string) bool { return strings.HasPrefix(s, "CreateContainer") })
			if c.wantMsg == "" {
				if err != nil || !created {
					t.Fatalf("sync: %v, created %v", err, created)
				}
				return
			}
			if created || !errors.Is(err, kubecontainer.ErrCreateConfig) {
				t.Fatalf("sync: %v, created %v; want CreateContainerConfigError and no container", err, created)
			}
			r, ok := f.m.Reasons.Get(pod.UID, "app")
			if !ok || r.Reason != "CreateContainerConfigError" || r.Message != c.wantMsg {
				t.Fatalf("waiting reason %+v, want CreateContainerConfigError %q", r, c.wantMsg)
			}
		})
	}
}
