package nodestatus

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent/kubeclient"
	"github.com/nodelet/nodelet/test/harness/kubefake"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodelet/nodelet/test/harness/fakecri"
)

func ready(t *testing.T, n *v1.Node) v1.NodeCondition {
	t.Helper()
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	t.Fatal("no Ready condition")
	return v1.NodeCondition{}
}

func TestRegisterStatusAndLease(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	cri.AddImage("busybox:1")
	taint := v1.Taint{Key: "example.com/gpu", Value: "yes", Effect: v1.TaintEffectNoSchedule}
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1", NodeIPs: []string{"192.0.2.10"}, MaxPods: 42,
		Labels: map[string]string{"node-role.example.com/edge": ""}, Taints: []v1.Taint{taint}})
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Labels["node-role.example.com/edge"]; !ok || len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != taint {
		t.Fatalf("registered labels %v taints %v", node.Labels, node.Spec.Taints)
	}
	if len(node.Status.Images) != 1 || node.Status.Images[0].Names[0] != "busybox:1" {
		t.Fatalf("node images %+v", node.Status.Images)
	}
	if h := node.Status.RuntimeHandlers; len(h) != 2 || h[1].Name != "fake" || h[1].Features == nil || !*h[1].Features.UserNamespaces {
		t.Fatalf("runtime handlers %+v", h)
	}
	if c := ready(t, node); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready %v", c)
	}
	if p := node.Status.Capacity[v1.ResourcePods]; p.Value() != 42 {
		t.Fatalf("pods capacity %v", p)
	}
	if node.Status.Addresses[0].Address != "192.0.2.10" || node.Status.NodeInfo.ContainerRuntimeVersion != "fakecri://0.0.1" {
		t.Fatalf("status %+v", node.Status)
	}

	cri.SetNotReady(true)
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	node, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := ready(t, node); c.Status != v1.ConditionFalse || !strings.Contains(c.Message, "FakeDown") {
		t.Fatalf("Ready after runtime down: %+v", c)
	}

	// A second agent start finds the Node and keeps it.
	if err := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 42}).Register(ctx); err != nil {
		t.Fatal(err)
	}

	if err := m.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l1, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || *l1.Spec.HolderIdentity != "n1" {
		t.Fatalf("lease %v %v", l1, err)
	}
	if err := m.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l2, _ := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
	if l2.Spec.RenewTime.Before(l1.Spec.RenewTime) {
		t.Fatal("lease renew time went backwards")
	}
}

func TestPublishDaemonEndpoint(t *testing.T) {
	client := fake.NewSimpleClientset()
	// The publisher's first patch comes before the node exists; later ones wait until Register
	// returned. A real apiserver refuses Register's status update made from a Get older than the
	// patch (a resourceVersion conflict, then retried); the fake does not, so the test keeps the
	// two apart rather than let the stale update win now and then.
	firstPatch, registered := make(chan struct{}), make(chan struct{})
	var patches atomic.Int32
	client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			close(firstPatch)
		} else {
			<-registered
		}
		return false, nil, nil
	})
	m := New(Deps{Client: kubefake.Wrap(client), NodeName: "n1", NodeIPs: []string{"10.0.0.5"}, MaxPods: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- PublishDaemonEndpoint(ctx, kubefake.Wrap(client), "n1", 10250, nil) }()
	// The node is registered after the API started: the publisher waits for it.
	<-firstPatch
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	close(registered)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A later status update keeps the port.
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != 10250 {
		t.Fatalf("kubelet endpoint port %d", got)
	}
	if a := n.Status.Addresses; len(a) == 0 || a[0].Type != v1.NodeInternalIP || a[0].Address != "10.0.0.5" {
		t.Fatalf("addresses %v", a)
	}
}

// Capacity is what the downward API's defaults come from too, so it must not make up a 0.
func TestCapacity(t *testing.T) {
	c := Capacity(110, t.TempDir())
	if e := c[v1.ResourceEphemeralStorage]; e.Value() <= 0 {
		t.Errorf("ephemeral-storage capacity %v", e.String())
	}
	if cpu := c[v1.ResourceCPU]; cpu.Value() < 1 {
		t.Errorf("cpu %v", cpu.String())
	}
	if mem, ok := c[v1.ResourceMemory]; !ok || mem.Value() <= 0 {
		t.Errorf("memory %v %v", mem.String(), ok)
	}
	if pods := c[v1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("pods %v", pods.String())
	}
}

// As the kubelet with nodeStatusReportFrequency: a status that changed in nothing but its
// heartbeats is posted once per report period; a change is posted at once.
func TestUnchangedStatusIsReportedInfrequently(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	var pressure atomic.Value
	pressure.Store(v1.ConditionFalse)
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1",
		NodeIPs: []string{"192.0.2.10"}, StatusReportFrequency: 5 * time.Minute,
		Pressure: func() []v1.NodeCondition {
			return []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: pressure.Load().(v1.ConditionStatus)}}
		}})
	now := time.Unix(1_000_000, 0)
	m.now = func() time.Time { return now }
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	posts := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	update := func(after time.Duration) {
		t.Helper()
		now = now.Add(after)
		if err := m.UpdateStatus(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first := posts()
	update(10 * time.Second)
	update(10 * time.Second)
	if got := posts(); got != first {
		t.Fatalf("%d posts of an unchanged status within the report period", got-first)
	}
	pressure.Store(v1.ConditionTrue)
	update(10 * time.Second)
	if got := posts(); got != first+1 {
		t.Fatalf("a changed condition was posted %d times, want once", got-first)
	}
	update(4 * time.Minute)
	if got := posts(); got != first+1 {
		t.Fatal("posted before the report period ran out")
	}
	update(time.Minute)
	if got := posts(); got != first+2 {
		t.Fatal("the unchanged status was not posted after the report period")
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := ready(t, n); !c.LastHeartbeatTime.Time.Equal(now) {
		t.Fatalf("heartbeat %v, want %v", c.LastHeartbeatTime, now)
	}
}

// TestLeaseIsRenewedWhileAStatusUpdateHangs: the Lease has a loop of its own, so a status update
// stuck on a slow apiserver does not let the Lease lapse (which marks the node NotReady).
func TestLeaseIsRenewedWhileAStatusUpdateHangs(t *testing.T) {
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1", MaxPods: 10})
	if err := m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	// From here every read of the Node hangs until the test ends.
	hung := &hangingNodes{Client: kubefake.Wrap(client), release: make(chan struct{}), entered: make(chan struct{}, 1)}
	m.Client = hung
	m.StatusUpdateFrequency, m.LeaseRenewInterval = time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.keepCurrent(ctx); close(done) }()
	defer func() { cancel(); close(hung.release); <-done }()
	renewals := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" && (a.GetVerb() == "update" || a.GetVerb() == "create") {
				n++
			}
		}
		return n
	}
	<-hung.entered // a status update is stuck
	from := renewals()
	for renewals() < from+3 {
		time.Sleep(time.Millisecond)
	}
}

// hangingNodes is a client whose reads of the Node block until release is closed.
type hangingNodes struct {
	*kubefake.Client
	release chan struct{}
	entered chan struct{}
}

func (h *hangingNodes) Nodes() kubeclient.NodeInterface {
	return hangingNodeClient{h.Client.Nodes(), h}
}

type hangingNodeClient struct {
	kubeclient.NodeInterface
	h *hangingNodes
}

func (c hangingNodeClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error) {
	select {
	case c.h.entered <- struct{}{}:
	default:
	}
	<-c.h.release
	return c.NodeInterface.Get(ctx, name, opts)
}

// TestRenewalsAndUpdatesReadNothing: as the kubelet, the Lease is renewed from the copy last
// written and the status starts from the watched Node, so an idle node costs the apiserver its
// writes only; a conflict reads again.
func TestRenewalsAndUpdatesReadNothing(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1", MaxPods: 10})
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	m.Watched = func() (*v1.Node, error) { return client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}) }
	if err := m.RenewLease(ctx); err != nil { // the first renewal reads (and creates) it
		t.Fatal(err)
	}
	client.ClearActions()
	for range 3 {
		if err := m.RenewLease(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The watched Node stands in for a GET: the fake's own Get in Watched is not the agent's.
	watchedReads := 0
	m.Watched = func() (*v1.Node, error) {
		watchedReads++
		n, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "n1")
		if err != nil {
			return nil, err
		}
		return n.(*v1.Node), nil
	}
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("a read while idle: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if watchedReads != 1 {
		t.Errorf("the watched Node was read %d times, want 1", watchedReads)
	}
	// Someone else renewed the Lease meanwhile: the next renewal conflicts, reads and succeeds.
	l, _ := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
	l.ResourceVersion = "999"
	client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if u.ResourceVersion != "999" {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "n1", nil)
		}
		return false, nil, nil
	})
	client.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) { return true, l, nil })
	if err := m.RenewLease(ctx); err != nil {
		t.Fatalf("renewal after a conflict: %v", err)
	}
}

// A node not Ready at registration posts Ready the moment its runtime is, as the kubelet's
// fastStatusUpdateOnce does, not a status period later (an hour here); the pod CIDR the
// controller-manager gives the Node after registration reaches the runtime meanwhile.
func TestReadyIsPostedAsSoonAsTheRuntimeIs(t *testing.T) {
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1", MaxPods: 10,
		StatusUpdateFrequency: time.Hour, LeaseRenewInterval: time.Hour})
	m.Watched = func() (*v1.Node, error) { return client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}) }
	cri.SetNotReady(true)
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := ready(t, node); c.Status != v1.ConditionFalse {
		t.Fatalf("Ready at registration with the runtime down: %+v", c)
	}
	done := make(chan struct{})
	go func() { m.keepCurrent(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The bounds only fail a test that would otherwise wait for the hour-long period.
	bound := time.Now().Add(time.Minute)
	for len(cri.CallsWithPrefix("UpdateRuntimeConfig")) == 0 {
		if time.Now().After(bound) {
			t.Fatal("the pod CIDR never reached the runtime")
		}
		time.Sleep(time.Millisecond)
	}
	if got := cri.CallsWithPrefix("UpdateRuntimeConfig"); got[0] != "UpdateRuntimeConfig 10.244.3.0/24" {
		t.Fatalf("the runtime was given %q", got)
	}
	cri.SetNotReady(false)
	for {
		node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if ready(t, node).Status == v1.ConditionTrue {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("Ready was not posted when the runtime became ready")
		}
		time.Sleep(time.Millisecond)
	}
}
