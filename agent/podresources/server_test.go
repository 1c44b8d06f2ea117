package podresources

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/agent/cm/cpumanager"
	"github.com/nodelet/nodelet/agent/podstate"
)

// What the agent wires in: the View's lookup makes Get find any desired pod.
var (
	_ Pods      = (*podstate.View)(nil)
	_ podFinder = (*podstate.View)(nil)
	_ CPUs      = (*cpumanager.Manager)(nil)
)

type fakePods []*v1.Pod

func (f fakePods) ActivePods() []*v1.Pod { return f }

// findingPods also finds pods that are no longer active, as podstate.View does.
type findingPods struct {
	fakePods
	all []*v1.Pod
}

func (f findingPods) Pod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range f.all {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// fakeDevices gives each container one device named after it; "plain" containers get none.
type fakeDevices struct{}

func (fakeDevices) ContainerDevices(podUID, container string) []*podresourcesv1.ContainerDevices {
	if container == "plain" {
		return nil
	}
	return []*podresourcesv1.ContainerDevices{{ResourceName: "example.com/gpu", DeviceIds: []string{podUID + "/" + container},
		Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 0}}}}}
}

func (fakeDevices) AllocatableDevices() []*podresourcesv1.ContainerDevices {
	return []*podresourcesv1.ContainerDevices{{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu0", "gpu1"}}}
}

// fakeCPUs pins the containers named in it.
type fakeCPUs map[string][]int64

func (f fakeCPUs) ContainerCPUs(podUID, container string) []int64 { return f[podUID+"/"+container] }
func (fakeCPUs) AllocatableCPUs() []int64                         { return []int64{1, 2, 3} }

func testPod(uid, name string, init []v1.Container, app ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"},
		Spec: v1.PodSpec{InitContainers: init}}
	for _, n := range app {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
	}
	return p
}

// podWithSidecar has a plain init container, a sidecar and two app containers.
func podWithSidecar() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return testPod("u1", "web", []v1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}}, "app", "plain")
}

func TestList(t *testing.T) {
	web, other := podWithSidecar(), testPod("u2", "db", nil, "db")
	cpus := fakeCPUs{"u1/proxy": {4}, "u1/app": {5, 6}}
	withAll := []*podresourcesv1.PodResources{
		{Name: "web", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
			{Name: "proxy", Devices: fakeDevices{}.ContainerDevices("u1", "proxy"), CpuIds: []int64{4}},
			{Name: "app", Devices: fakeDevices{}.ContainerDevices("u1", "app"), CpuIds: []int64{5, 6}},
			{Name: "plain"},
		}},
		{Name: "db", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
			{Name: "db", Devices: fakeDevices{}.ContainerDevices("u2", "db")},
		}},
	}
	bare := []*podresourcesv1.PodResources{
		{Name: "web", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{{Name: "proxy"}, {Name: "app"}, {Name: "plain"}}},
		{Name: "db", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{{Name: "db"}}},
	}
	for _, tc := range []struct {
		name string
		deps Deps
		want []*podresourcesv1.PodResources
	}{
		{"devices and CPUs; sidecars listed, other init containers not", Deps{Pods: fakePods{web, other}, Devices: fakeDevices{}, CPUs: cpus}, withAll},
		{"no device or CPU manager", Deps{Pods: fakePods{web, other}}, bare},
		{"no pods", Deps{Pods: fakePods{}, Devices: fakeDevices{}, CPUs: cpus}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := New(tc.deps).List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			want := &podresourcesv1.ListPodResourcesResponse{PodResources: tc.want}
			if !proto.Equal(resp, want) {
				t.Errorf("List:\n got %v\nwant %v", resp, want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	web, gone := podWithSidecar(), testPod("u3", "done", nil, "job")
	webResources := &podresourcesv1.PodResources{Name: "web", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
		{Name: "proxy", Devices: fakeDevices{}.ContainerDevices("u1", "proxy")},
		{Name: "app", Devices: fakeDevices{}.ContainerDevices("u1", "app"), CpuIds: []int64{2}},
		{Name: "plain"},
	}}
	active := fakePods{web}
	finding := findingPods{fakePods: active, all: []*v1.Pod{web, gone}}
	for _, tc := range []struct {
		name      string
		pods      Pods
		namespace string
		pod       string
		want      *podresourcesv1.PodResources
		err       string
	}{
		{"an active pod", active, "ns", "web", webResources, ""},
		{"through the lookup", finding, "ns", "web", webResources, ""},
		{"a finished pod the lookup still holds", finding, "ns", "done",
			&podresourcesv1.PodResources{Name: "done", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
				{Name: "job", Devices: fakeDevices{}.ContainerDevices("u3", "job")}}}, ""},
		{"missing", active, "ns", "nope", nil, "pod nope in namespace ns not found"},
		{"wrong namespace", finding, "other", "web", nil, "pod web in namespace other not found"},
		{"not active and no lookup", active, "ns", "done", nil, "pod done in namespace ns not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Deps{Pods: tc.pods, Devices: fakeDevices{}, CPUs: fakeCPUs{"u1/app": {2}}})
			resp, err := s.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodNamespace: tc.namespace, PodName: tc.pod})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(resp.GetPodResources(), tc.want) {
				t.Errorf("Get:\n got %v\nwant %v", resp.GetPodResources(), tc.want)
			}
		})
	}
}

func TestGetAllocatableResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		deps Deps
		want *podresourcesv1.AllocatableResourcesResponse
	}{
		{"devices and CPUs", Deps{Pods: fakePods{}, Devices: fakeDevices{}, CPUs: fakeCPUs{}},
			&podresourcesv1.AllocatableResourcesResponse{Devices: fakeDevices{}.AllocatableDevices(), CpuIds: []int64{1, 2, 3}}},
		{"no device or CPU manager", Deps{Pods: fakePods{}}, &podresourcesv1.AllocatableResourcesResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := New(tc.deps).GetAllocatableResources(context.Background(), &podresourcesv1.AllocatableResourcesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(resp, tc.want) {
				t.Errorf("got %v, want %v", resp, tc.want)
			}
		})
	}
}

// The limiter's clock stands still, so the burst is spent and refilled exactly when the test says.
func TestRateLimit(t *testing.T) {
	s := New(Deps{Pods: fakePods{}})
	now := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return now }
	handled := 0
	call := func() error {
		_, err := s.limit(context.Background(), &podresourcesv1.ListPodResourcesRequest{}, &grpc.UnaryServerInfo{},
			func(context.Context, any) (any, error) { handled++; return nil, nil })
		return err
	}
	for i := range burst {
		if err := call(); err != nil {
			t.Fatalf("call %d of the burst: %v", i+1, err)
		}
	}
	err := call()
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "rejected by rate limit" {
		t.Fatalf("call past the burst: %v", err)
	}
	now = now.Add(time.Second / qps) // one token back
	if err := call(); err != nil {
		t.Fatalf("after one refill: %v", err)
	}
	if err := call(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call after one refill: %v", err)
	}
	if handled != burst+1 {
		t.Errorf("%d calls reached the handler, want %d", handled, burst+1)
	}
}
