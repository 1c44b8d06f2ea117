package images

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

var pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1"}}

func TestDefaultsAndPolicy(t *testing.T) {
	cases := []struct {
		name, image string
		policy      v1.PullPolicy
		present     bool
		wantPull    bool
		wantErr     error
	}{
		{"latest defaults to Always", "busybox:latest", "", true, true, nil},
		{"no tag defaults to Always", "busybox", "", true, true, nil},
		{"tag defaults to IfNotPresent, present", "busybox:1.36", "", true, false, nil},
		{"tag defaults to IfNotPresent, absent", "busybox:1.36", "", false, true, nil},
		{"registry port is not a tag", "localhost:5000/busybox", "", true, true, nil},
		{"digest defaults to IfNotPresent", "busybox@sha256:abc", "", true, false, nil},
		{"Always pulls a present image", "busybox:1.36", v1.PullAlways, true, true, nil},
		{"IfNotPresent keeps a present latest", "busybox:latest", v1.PullIfNotPresent, true, false, nil},
		{"Never with the image", "busybox:1.36", v1.PullNever, true, false, nil},
		{"Never without it", "busybox:1.36", v1.PullNever, false, false, kubecontainer.ErrImageNeverPull},
		{"invalid name", "bad name", "", false, false, kubecontainer.ErrInvalidImageName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeImages("")
			if c.present {
				f.add("sha256:present", DefaultTag(c.image), 10)
			}
			rec := record.NewFakeRecorder(10)
			m := NewManager(f, Options{Recorder: rec})
			ref, err := m.EnsureImageExists(context.Background(), pod, &v1.Container{Name: "c", Image: c.image, ImagePullPolicy: c.policy}, nil)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if pulled := len(f.pulls) > 0; pulled != c.wantPull {
				t.Fatalf("pulled %v (%v), want %v", pulled, f.pulls, c.wantPull)
			}
			if err == nil && ref == "" {
				t.Fatal("no image ref")
			}
		})
	}
}

type creds []*runtimeapi.AuthConfig

func (c creds) For(context.Context, *v1.Pod, string) []*runtimeapi.AuthConfig { return c }

func TestPullEventsCredentialsAndBackOff(t *testing.T) {
	f := newFakeImages("")
	f.needUser = "good"
	rec := record.NewFakeRecorder(20)
	now := time.Now()
	var used []string
	m := NewManager(f, Options{Recorder: rec, Used: func(id string) { used = append(used, id) },
		Credentials: creds{{Username: "bad"}, {Username: "good"}}, Now: func() time.Time { return now }})
	ctx := context.Background()
	c := &v1.Container{Name: "c", Image: "reg/app:1"}
	if _, err := m.EnsureImageExists(ctx, pod, c, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.pulls, ",") != "reg/app:1 bad,reg/app:1 good" {
		t.Fatalf("pulls %v", f.pulls)
	}
	events := drain(rec)
	if len(events) != 2 || !strings.Contains(events[0], "Pulling") || !strings.Contains(events[1], "Image size: 4096 bytes") {
		t.Fatalf("events %q", events)
	}
	if len(used) != 1 {
		t.Fatalf("used %v", used)
	}

	f.failPull["reg/bad:1"] = errors.New("manifest unknown")
	bad := &v1.Container{Name: "b", Image: "reg/bad:1"}
	if _, err := m.EnsureImageExists(ctx, pod, bad, nil); !errors.Is(err, kubecontainer.ErrImagePull) {
		t.Fatalf("first failure: %v", err)
	}
	n := len(f.pulls)
	if _, err := m.EnsureImageExists(ctx, pod, bad, nil); !errors.Is(err, kubecontainer.ErrImagePullBackOff) || len(f.pulls) != n {
		t.Fatalf("in back-off: %v, pulls %d → %d", err, n, len(f.pulls))
	}
	now = now.Add(11 * time.Second)
	if _, err := m.EnsureImageExists(ctx, pod, bad, nil); !errors.Is(err, kubecontainer.ErrImagePull) || len(f.pulls) == n {
		t.Fatalf("after back-off: %v", err)
	}
	now = now.Add(11 * time.Second) // the back-off doubled: still waiting
	if _, err := m.EnsureImageExists(ctx, pod, bad, nil); !errors.Is(err, kubecontainer.ErrImagePullBackOff) {
		t.Fatalf("doubled back-off: %v", err)
	}
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func boolp(b bool) *bool { return &b }

func TestPullConcurrency(t *testing.T) {
	cases := []struct {
		name      string
		serialize *bool
		max       int32
		want      int
	}{
		{"default is serialized", nil, 0, 1},
		{"serialized ignores the max", boolp(true), 4, 1},
		{"parallel bounded", boolp(false), 2, 2},
		{"parallel unbounded", boolp(false), 0, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeImages("")
			f.gate = make(chan struct{})
			m := NewManager(f, Options{SerializeImagePulls: c.serialize, MaxParallelImagePulls: c.max})
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					img := "reg/img:" + string(rune('a'+i))
					if _, err := m.EnsureImageExists(context.Background(), pod, &v1.Container{Image: img}, nil); err != nil {
						t.Error(err)
					}
				}()
			}
			deadline := time.Now().Add(30 * time.Second) // guards a hang only
			for {
				f.mu.Lock()
				n := f.inFlight
				f.mu.Unlock()
				if n >= c.want || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			close(f.gate)
			wg.Wait()
			if f.maxSeen != c.want || len(f.pulls) != 5 {
				t.Fatalf("max parallel pulls %d, want %d (%d pulls)", f.maxSeen, c.want, len(f.pulls))
			}
		})
	}
}

func TestWaitingPullGivesUpWithItsContext(t *testing.T) {
	f := newFakeImages("")
	f.gate = make(chan struct{})
	defer close(f.gate)
	m := NewManager(f, Options{})
	go m.EnsureImageExists(context.Background(), pod, &v1.Container{Image: "reg/slow:1"}, nil)
	for {
		f.mu.Lock()
		n := f.inFlight
		f.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.EnsureImageExists(ctx, pod, &v1.Container{Image: "reg/queued:1"}, nil); !errors.Is(err, kubecontainer.ErrImagePull) {
		t.Fatalf("queued pull with a dead context: %v", err)
	}
}
