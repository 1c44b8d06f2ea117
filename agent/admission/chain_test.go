package admission

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/cm/cpumanager"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
)

type fakeEviction struct{ reason string }

func (f fakeEviction) Admit(*v1.Pod) (string, string) {
	if f.reason == "" {
		return "", ""
	}
	return f.reason, "The node had condition: [MemoryPressure]. "
}

// fakeCPUs refuses when told and counts the pods it was asked about (asking takes CPUs).
type fakeCPUs struct {
	err   error
	asked int
}

func (f *fakeCPUs) Admit(*v1.Pod) error { f.asked++; return f.err }

type finished map[types.UID]bool

func (f finished) IsPodKnownFinished(uid types.UID) bool { return f[uid] }

func sysctls(t *testing.T, unsafe ...string) *sysctl.Allowlist {
	t.Helper()
	w, err := sysctl.New(unsafe)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func withSysctls(p *v1.Pod, hostNet bool, names ...string) *v1.Pod {
	p.Spec.HostNetwork = hostNet
	p.Spec.SecurityContext = &v1.PodSecurityContext{}
	for _, n := range names {
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return p
}

func predicates() *Handler {
	return New(AnyWay(nil, node()), func() v1.ResourceList { return alloc })
}

func refusal(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Reason + ": " + ae.Message
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

// The handlers run in the kubelet's order and the first refusal is the pod's: a pod that every
// handler would refuse gets the eviction manager's reason, one that passes it the sysctls', and
// so on down to the CPU manager, which is asked only when everything before admitted the pod.
func TestChainOrder(t *testing.T) {
	unsafe := func(p *v1.Pod) { withSysctls(p, false, "kernel.msgmax") }
	elsewhere := onNode("node-b")
	claim := func(p *v1.Pod) { p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}} }
	cpuRefusal := &cpumanager.AdmitError{Reason: "UnexpectedAdmissionError", Message: "Allocate failed"}
	for _, c := range []struct {
		name     string
		pressure string
		maxPods  int
		cpuErr   error
		opts     []podOpt
		want     string
		cpuAsked bool
	}{
		{name: "pressure first", pressure: "Evicted", maxPods: 1, cpuErr: cpuRefusal, opts: []podOpt{unsafe, elsewhere, claim},
			want: "Evicted: The node had condition: [MemoryPressure]. "},
		{name: "then sysctls", maxPods: 1, cpuErr: cpuRefusal, opts: []podOpt{unsafe, elsewhere, claim},
			want: `SysctlForbidden: forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "then the pod limit", maxPods: 1, cpuErr: cpuRefusal, opts: []podOpt{elsewhere, claim},
			want: "OutOfpods: node has reached its pod limit of 1"},
		{name: "then the predicates", maxPods: 10, cpuErr: cpuRefusal, opts: []podOpt{elsewhere, claim},
			want: "NodeName: Predicate NodeName failed: node(s) didn't match the requested node name"},
		{name: "then resource claims", maxPods: 10, cpuErr: cpuRefusal, opts: []podOpt{claim},
			want: `FailedPrepareDynamicResources: Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim "gpu"`},
		{name: "the CPU manager last", maxPods: 10, cpuErr: cpuRefusal, want: "UnexpectedAdmissionError: Allocate failed", cpuAsked: true},
		{name: "a CPU error without a reason", maxPods: 10, cpuErr: errors.New("checkpoint: disk full"),
			want: "OutOfpods: checkpoint: disk full", cpuAsked: true},
		{name: "admitted", maxPods: 10, cpuAsked: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cpus := &fakeCPUs{err: c.cpuErr}
			chain := NewChain(Parts{Eviction: fakeEviction{c.pressure}, Sysctls: sysctls(t), MaxPods: c.maxPods,
				Predicates: predicates(), AppArmor: NewAppArmor(func() bool { return true }), CPUs: cpus}, finished{})
			err := chain.Admit(mkPod("new", c.opts...), []*v1.Pod{mkPod("running")})
			if got := refusal(err); got != c.want {
				t.Errorf("refused with %q, want %q", got, c.want)
			}
			if asked := cpus.asked > 0; asked != c.cpuAsked {
				t.Errorf("CPU manager asked: %v, want %v", asked, c.cpuAsked)
			}
		})
	}
}

// AppArmor comes after the predicates and before the CPU manager.
func TestChainAppArmorBetweenPredicatesAndCPUs(t *testing.T) {
	confined := func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
	}
	cpus := &fakeCPUs{}
	chain := NewChain(Parts{Sysctls: sysctls(t), MaxPods: 10, Predicates: predicates(),
		AppArmor: NewAppArmor(func() bool { return false }), CPUs: cpus}, nil)
	if got := refusal(chain.Admit(mkPod("new", confined, onNode("node-b")), nil)); !strings.HasPrefix(got, "NodeName:") {
		t.Errorf("refused with %q, want the predicates' NodeName first", got)
	}
	want := "AppArmor: Cannot enforce AppArmor: AppArmor is not enabled on the host"
	if got := refusal(chain.Admit(mkPod("new", confined), nil)); got != want || cpus.asked != 0 {
		t.Errorf("refused with %q (CPU manager asked %d times), want %q before the CPU manager", got, cpus.asked, want)
	}
}

// The pod limit and the predicates count only the other pods that may still run: not the pod
// itself (admitted again after a restart) and not those whose workers finished.
func TestChainCountsOnlyPodsThatMayRun(t *testing.T) {
	chain := NewChain(Parts{MaxPods: 2, Predicates: predicates()}, finished{"done": true})
	active := []*v1.Pod{mkPod("new"), mkPod("done"), mkPod("running")}
	if err := chain.Admit(mkPod("new"), active); err != nil {
		t.Fatalf("refused: %v", err)
	}
	active = append(active, mkPod("other"))
	if got := refusal(chain.Admit(mkPod("new"), active)); got != "OutOfpods: node has reached its pod limit of 2" {
		t.Fatalf("refused with %q", got)
	}
}

func TestChainChecksSysctls(t *testing.T) {
	cases := []struct {
		name    string
		unsafe  []string
		pod     *v1.Pod
		wantMsg string
	}{
		{name: "safe", pod: withSysctls(mkPod("p"), false, "net.ipv4.ip_local_port_range")},
		{name: "unsafe", pod: withSysctls(mkPod("p"), false, "kernel.msgmax"), wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe allowed", unsafe: []string{"kernel.msg*"}, pod: withSysctls(mkPod("p"), false, "kernel.msgmax")},
		{name: "net with hostNetwork", unsafe: []string{"net.*"}, pod: withSysctls(mkPod("p"), true, "net.core.somaxconn"),
			wantMsg: `forbidden sysctl: "net.core.somaxconn" not allowed with host net enabled`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chain := NewChain(Parts{Sysctls: sysctls(t, c.unsafe...), MaxPods: 10, Predicates: predicates()}, nil)
			err := chain.Admit(c.pod, nil)
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != "SysctlForbidden" || ae.Message != c.wantMsg {
				t.Fatalf("got %v, want SysctlForbidden %q", err, c.wantMsg)
			}
		})
	}
}

// A pod asking for DRA devices fails admission: it never runs without them.
func TestChainRefusesResourceClaims(t *testing.T) {
	chain := NewChain(Parts{Sysctls: sysctls(t), MaxPods: 10, Predicates: predicates()}, nil)
	pod := mkPod("p")
	if err := chain.Admit(pod, nil); err != nil {
		t.Fatalf("pod without claims: %v", err)
	}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	var ae *Error
	if err := chain.Admit(pod, nil); !errors.As(err, &ae) || ae.Reason != "FailedPrepareDynamicResources" ||
		ae.Message != `Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim "gpu"` {
		t.Fatalf("got %v, want FailedPrepareDynamicResources", err)
	}
}

// The device manager comes last, after the CPU manager, and its refusal is the kubelet's
// UnexpectedAdmissionError.
func TestChainDevicesAfterCPUs(t *testing.T) {
	cpus, devices := &fakeCPUs{err: &cpumanager.AdmitError{Reason: "UnexpectedAdmissionError", Message: "no cpus"}}, &fakeCPUs{}
	chain := NewChain(Parts{MaxPods: 10, Predicates: predicates(), CPUs: cpus, Devices: devices}, nil)
	if got := refusal(chain.Admit(mkPod("new"), nil)); got != "UnexpectedAdmissionError: no cpus" || devices.asked != 0 {
		t.Errorf("refused with %q (device manager asked %d times), want the CPU manager's first", got, devices.asked)
	}
	cpus.err = nil
	devices.err = errors.New("requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0")
	want := "UnexpectedAdmissionError: Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0, which is unexpected"
	if got := refusal(chain.Admit(mkPod("new"), nil)); got != want {
		t.Errorf("refused with %q, want %q", got, want)
	}
}
