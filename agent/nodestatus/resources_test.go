package nodestatus

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/fakecri"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// machine is the container manager's answer, changed by the test between status updates.
type machine struct {
	mu   sync.Mutex
	pods string
}

func (m *machine) resources() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse(m.pods),
		"hugepages-2Mi":   resource.MustParse("0"),
	}
	allocatable = capacity.DeepCopy()
	allocatable[v1.ResourceCPU] = resource.MustParse("3500m")
	return capacity, allocatable
}

func (m *machine) setPods(n string) {
	m.mu.Lock()
	m.pods = n
	m.mu.Unlock()
}

func quantity(t *testing.T, l v1.ResourceList, name v1.ResourceName) string {
	t.Helper()
	q, ok := l[name]
	if !ok {
		return "<none>"
	}
	return q.String()
}

// An extended resource an operator patches into the Node's status.capacity (the documented way to
// advertise one) survives the agent's status updates and its next registration, with allocatable
// following it, while what the agent measures is still refreshed each time.
func TestStatusUpdatesKeepOthersExtendedResources(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	mach := &machine{pods: "110"}
	deps := Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 110, Resources: mach.resources}
	m := New(deps)
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// kubectl patch node n1 --subresource=status --type=json -p
	//   '[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"}, ...]'
	// A huge page size the kernel stopped offering, and an allocatable with no capacity, are the
	// agent's to clear.
	patch := `[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"},
		{"op":"add","path":"/status/capacity/hugepages-1Gi","value":"2Gi"},
		{"op":"add","path":"/status/allocatable/example.com~1orphan","value":"1"}]`
	if _, err := client.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	check := func(when, pods string) {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, a := n.Status.Capacity, n.Status.Allocatable
		for _, tc := range []struct {
			list      v1.ResourceList
			name      v1.ResourceName
			want, why string
		}{
			{c, "example.com/dongle", "4", "the operator's capacity"},
			{a, "example.com/dongle", "4", "allocatable follows the operator's capacity"},
			{c, v1.ResourcePods, pods, "the agent's pods, refreshed"},
			{a, v1.ResourcePods, pods, "the agent's allocatable pods, refreshed"},
			{a, v1.ResourceCPU, "3500m", "the agent's allocatable cpu"},
			{c, "hugepages-1Gi", "<none>", "a huge page size no longer offered"},
			{a, "example.com/orphan", "<none>", "an allocatable without capacity"},
		} {
			if got := quantity(t, tc.list, tc.name); got != tc.want {
				t.Errorf("%s: %s %s = %s, want %s", when, tc.why, tc.name, got, tc.want)
			}
		}
	}

	mach.setPods("50")
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a status update", "50")

	// The agent restarts and finds its Node.
	mach.setPods("60")
	if err := New(deps).Register(ctx); err != nil {
		t.Fatal(err)
	}
	check("after registering again", "60")
}

// devicePlugins is the device manager's answer, set by the test.
type devicePlugins struct {
	mu                    sync.Mutex
	capacity, allocatable v1.ResourceList
	removed               []string
	reset                 bool
}

func (d *devicePlugins) Capacity() (v1.ResourceList, v1.ResourceList, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	removed := d.removed
	d.removed = nil
	return d.capacity.DeepCopy(), d.allocatable.DeepCopy(), removed
}

func (d *devicePlugins) ShouldResetExtendedResourceCapacity() bool { return d.reset }

// The device plugins' resources are the device manager's: its devices and healthy devices, zero
// once withdrawn; an agent without a device checkpoint registering over an existing Node zeroes
// the extended resources nobody vouches for any more, as the kubelet does.
func TestDevicePluginResources(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	mach := &machine{pods: "110"}
	devs := &devicePlugins{capacity: v1.ResourceList{"example.com/gpu": resource.MustParse("3")},
		allocatable: v1.ResourceList{"example.com/gpu": resource.MustParse("2")}}
	deps := Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 110, Resources: mach.resources, Devices: devs}
	m := New(deps)
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	patch := `[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"}]`
	if _, err := client.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[v1.ResourceName][2]string) {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			if c, a := quantity(t, n.Status.Capacity, name), quantity(t, n.Status.Allocatable, name); c != w[0] || a != w[1] {
				t.Errorf("%s: %s capacity %s allocatable %s, want %s %s", when, name, c, a, w[0], w[1])
			}
		}
	}
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	check("registered", map[v1.ResourceName][2]string{"example.com/gpu": {"3", "2"}, "example.com/dongle": {"4", "4"}})

	devs.mu.Lock()
	devs.capacity, devs.allocatable, devs.removed = v1.ResourceList{}, v1.ResourceList{}, []string{"example.com/gpu"}
	devs.mu.Unlock()
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	check("plugin withdrawn", map[v1.ResourceName][2]string{"example.com/gpu": {"0", "0"}, "example.com/dongle": {"4", "4"}})

	// Restarted without a checkpoint: every extended resource zeroed, the plugins' own set again.
	devs.mu.Lock()
	devs.capacity, devs.allocatable, devs.reset = v1.ResourceList{"example.com/fpga": resource.MustParse("1")}, v1.ResourceList{"example.com/fpga": resource.MustParse("1")}, true
	devs.mu.Unlock()
	m2 := New(deps)
	if err := m2.Register(ctx); err != nil {
		t.Fatal(err)
	}
	check("registered again without a checkpoint", map[v1.ResourceName][2]string{"example.com/gpu": {"0", "0"}, "example.com/dongle": {"0", "0"},
		"example.com/fpga": {"1", "1"}})
	// The reset is done once: a resource patched in afterwards stays.
	if _, err := client.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := m2.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	check("patched after the reset", map[v1.ResourceName][2]string{"example.com/dongle": {"4", "4"}})
}
