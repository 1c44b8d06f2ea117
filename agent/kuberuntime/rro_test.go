package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// handlersRuntime answers Status with the handlers it is given and counts the calls; the other
// RPCs are not used by mount resolution.
type handlersRuntime struct {
	runtimeapi.RuntimeServiceClient
	handlers []*runtimeapi.RuntimeHandler
	fail     bool
	calls    atomic.Int32
}

func (r *handlersRuntime) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	r.calls.Add(1)
	if r.fail {
		return nil, errors.New("runtime down")
	}
	return &runtimeapi.StatusResponse{RuntimeHandlers: r.handlers}, nil
}

func rroHandler(name string, rro bool) *runtimeapi.RuntimeHandler {
	return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: rro}}
}

type fixedClasses map[string]string

func (f fixedClasses) Handler(_ context.Context, name string) (string, error) {
	if h, ok := f[name]; ok {
		return h, nil
	}
	return "", errors.New("runtimeclass not found")
}

// rroPod has one hostPath volume mounted read-only once per mode, in that order.
func rroPod(modes ...v1.RecursiveReadOnlyMode) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}}}
	for i, m := range modes {
		m := m
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			v1.VolumeMount{Name: "host", MountPath: "/m" + string(rune('0'+i)), ReadOnly: true, RecursiveReadOnly: &m})
	}
	return pod
}

// TestMountsRecursiveReadOnlyPerHandler: the CRI mounts carry recursive_read_only as the pod's
// runtime handler (its RuntimeClass's, or the default "") allows, and Enabled on a handler without
// support is refused with the kubelet's message.
func TestMountsRecursiveReadOnlyPerHandler(t *testing.T) {
	modes := []v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled}
	for _, tc := range []struct {
		name     string
		class    string
		handlers []*runtimeapi.RuntimeHandler
		want     []bool // per mode; nil: refused
	}{
		{name: "default handler supports", handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true), rroHandler("runc", true)},
			want: []bool{false, true, true}},
		{name: "class's handler supports", class: "fast", handlers: []*runtimeapi.RuntimeHandler{rroHandler("", false), rroHandler("crun", true)},
			want: []bool{false, true, true}},
		{name: "class's handler does not", class: "sandboxed", handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true), rroHandler("runsc", false)}},
		{name: "handler not listed", class: "sandboxed", handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true)}},
		{name: "no handlers listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &handlersRuntime{handlers: tc.handlers}
			m := NewManager(Deps{Runtime: rt, RuntimeClasses: fixedClasses{"fast": "crun", "sandboxed": "runsc"}})
			pod := rroPod(modes...)
			if tc.class != "" {
				pod.Spec.RuntimeClassName = &tc.class
			}
			mounts, err := m.makeMounts(context.Background(), pod, &pod.Spec.Containers[0], nil, nil)
			if tc.want == nil {
				want := `failed to resolve recursive read-only mode: volume "host" requested recursive read-only mode, but it is not supported by the runtime`
				if err == nil || err.Error() != want {
					t.Fatalf("err %v, want %q", err, want)
				}
				// IfPossible alone falls back to a plain read-only mount.
				pod = rroPod(v1.RecursiveReadOnlyIfPossible)
				pod.Spec.RuntimeClassName = &tc.class
				if tc.class == "" {
					pod.Spec.RuntimeClassName = nil
				}
				if mounts, err = m.makeMounts(context.Background(), pod, &pod.Spec.Containers[0], nil, nil); err != nil ||
					mounts[0].RecursiveReadOnly || !mounts[0].Readonly {
					t.Fatalf("IfPossible without support: %v %v", mounts, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				if mounts[i].RecursiveReadOnly != want || !mounts[i].Readonly {
					t.Errorf("%s: recursive %v read-only %v, want recursive %v", modes[i], mounts[i].RecursiveReadOnly, mounts[i].Readonly, want)
				}
			}
		})
	}
}

// TestHandlerFeaturesAreCached: the runtime is asked at most once per refresh period (a failed
// Status included), not at all for a pod that asks for no recursive read-only mount, and a failed
// Status keeps the last answer.
func TestHandlerFeaturesAreCached(t *testing.T) {
	now := time.Unix(1000, 0)
	rt := &handlersRuntime{handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true)}}
	m := NewManager(Deps{Runtime: rt, Now: func() time.Time { return now }})
	ctx := context.Background()
	plain := testPod(v1.RestartPolicyAlways, nil, "app")
	if m.SupportsRecursiveReadOnlyMounts(ctx, plain) || rt.calls.Load() != 0 {
		t.Fatalf("a pod without recursiveReadOnly asked the runtime (%d calls)", rt.calls.Load())
	}
	pod := rroPod(v1.RecursiveReadOnlyIfPossible)
	for i := 0; i < 3; i++ {
		if !m.SupportsRecursiveReadOnlyMounts(ctx, pod) {
			t.Fatal("supported handler reported unsupported")
		}
	}
	if n := rt.calls.Load(); n != 1 {
		t.Fatalf("%d Status calls within the refresh period, want 1", n)
	}
	now = now.Add(handlerRefresh)
	rt.fail = true
	if !m.SupportsRecursiveReadOnlyMounts(ctx, pod) || rt.calls.Load() != 2 {
		t.Fatalf("after a failed refresh: %d calls, or the last answer lost", rt.calls.Load())
	}
	rt.fail = false
	rt.handlers = []*runtimeapi.RuntimeHandler{rroHandler("", false)}
	if !m.SupportsRecursiveReadOnlyMounts(ctx, pod) || rt.calls.Load() != 2 {
		t.Fatalf("a failed Status was retried within the refresh period (%d calls)", rt.calls.Load())
	}
	now = now.Add(handlerRefresh)
	if m.SupportsRecursiveReadOnlyMounts(ctx, pod) {
		t.Fatal("a changed answer was not picked up at the next refresh")
	}
}

// TestRecursiveReadOnlyConfigError: the container's config is not made (startContainer reports it as
// CreateContainerConfigError) when Enabled cannot be honoured.
func TestRecursiveReadOnlyConfigError(t *testing.T) {
	rt := &handlersRuntime{handlers: []*runtimeapi.RuntimeHandler{rroHandler("", false)}}
	m := NewManager(Deps{Runtime: rt, RootDir: t.TempDir()})
	pod := rroPod(v1.RecursiveReadOnlyEnabled)
	_, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", nil)
	if err == nil || !strings.Contains(err.Error(), "but it is not supported by the runtime") {
		t.Fatalf("err %v", err)
	}
}
