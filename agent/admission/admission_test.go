package admission

import (
	"errors"
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const nodeName = "node-a"

var alloc = v1.ResourceList{
	v1.ResourceCPU:              resource.MustParse("2"),
	v1.ResourceMemory:           resource.MustParse("4Gi"),
	v1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
	v1.ResourcePods:             resource.MustParse("4"),
	"example.com/gpu":           resource.MustParse("2"),
}

func node() *v1.Node {
	return LocalNode(nodeName, map[string]string{"zone": "a", "disk": "ssd"}, nil)
}

// podOpt shapes a test pod; pods are plain structs built by mkPod.
type podOpt func(*v1.Pod)

func mkPod(uid string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid),
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func requests(kv ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

func container(name string, kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(kv...)}})
	}
}

func initContainer(name string, sidecar bool, kv ...string) podOpt {
	return func(p *v1.Pod) {
		c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(kv...)}}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func static(p *v1.Pod) { p.Annotations["kubernetes.io/config.source"] = "file" }

func priority(n int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = &n } }

func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }

func onNode(n string) podOpt { return func(p *v1.Pod) { p.Spec.NodeName = n } }

func selector(kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func affinity(terms ...v1.NodeSelectorTerm) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func labelTerm(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func port(hostIP string, proto v1.Protocol, hostPort int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			v1.ContainerPort{ContainerPort: 8080, HostIP: hostIP, Protocol: proto, HostPort: hostPort})
	}
}

func initPort(sidecar bool, hostPort int32) podOpt {
	return func(p *v1.Pod) {
		initContainer("init", sidecar)(p)
		last := &p.Spec.InitContainers[len(p.Spec.InitContainers)-1]
		last.Ports = []v1.ContainerPort{{ContainerPort: 9090, HostPort: hostPort}}
	}
}

func tolerate(tol ...v1.Toleration) podOpt {
	return func(p *v1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol...) }
}

func admitted() Result { return Result{Admit: true} }

func rejected(reason, message string) Result { return Result{Reason: reason, Message: message} }

type admitCase struct {
	name   string
	node   *v1.Node
	pod    *v1.Pod
	others []*v1.Pod
	want   Result
}

func runCases(t *testing.T, cases []admitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.node
			if n == nil {
				n = node()
			}
			h := New(func() (*v1.Node, error) { return n, nil }, func() v1.ResourceList { return alloc })
			if got := h.Admit(c.pod, c.others); got != c.want {
				t.Fatalf("Admit = %+v\nwant    %+v", got, c.want)
			}
		})
	}
}

func TestNodeName(t *testing.T) {
	runCases(t, []admitCase{
		{name: "this node", pod: mkPod("a"), want: admitted()},
		{name: "no node name", pod: mkPod("a", onNode("")), want: admitted()},
		{name: "another node", pod: mkPod("a", onNode("node-b")),
			want: rejected("NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name")},
	})
}

func TestNodeAffinity(t *testing.T) {
	const msg = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	runCases(t, []admitCase{
		{name: "selector matches", pod: mkPod("a", selector("zone", "a", "disk", "ssd")), want: admitted()},
		{name: "selector on hostname", pod: mkPod("a", selector(v1.LabelHostname, nodeName)), want: admitted()},
		{name: "selector value differs", pod: mkPod("a", selector("zone", "b")), want: rejected("NodeAffinity", msg)},
		{name: "selector label missing", pod: mkPod("a", selector("gpu", "yes")), want: rejected("NodeAffinity", msg)},
		{name: "affinity In", pod: mkPod("a", affinity(labelTerm("zone", v1.NodeSelectorOpIn, "a", "b"))), want: admitted()},
		{name: "affinity NotIn", pod: mkPod("a", affinity(labelTerm("zone", v1.NodeSelectorOpNotIn, "a"))),
			want: rejected("NodeAffinity", msg)},
		{name: "affinity terms are ORed", pod: mkPod("a", affinity(labelTerm("zone", v1.NodeSelectorOpIn, "b"),
			labelTerm("disk", v1.NodeSelectorOpExists))), want: admitted()},
		{name: "affinity on metadata.name", pod: mkPod("a", affinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-b"}}}})), want: rejected("NodeAffinity", msg)},
		{name: "selector and affinity both must hold", pod: mkPod("a", selector("zone", "a"),
			affinity(labelTerm("disk", v1.NodeSelectorOpDoesNotExist))), want: rejected("NodeAffinity", msg)},
		{name: "arch label", pod: mkPod("a", selector(v1.LabelArchStable, goruntime.GOARCH)), want: admitted()},
	})
}

func TestNodePorts(t *testing.T) {
	const msg = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	web := mkPod("web", port("", "", 80))
	local := mkPod("local", port("127.0.0.1", v1.ProtocolTCP, 81))
	udp := mkPod("udp", port("", v1.ProtocolUDP, 53))
	others := []*v1.Pod{web, local, udp}
	runCases(t, []admitCase{
		{name: "free port", pod: mkPod("a", port("", "", 8080)), others: others, want: admitted()},
		{name: "same port, defaults", pod: mkPod("a", port("0.0.0.0", v1.ProtocolTCP, 80)), others: others, want: rejected("NodePorts", msg)},
		{name: "specific IP under a wildcard", pod: mkPod("a", port("10.0.0.1", v1.ProtocolTCP, 80)), others: others, want: rejected("NodePorts", msg)},
		{name: "wildcard over a specific IP", pod: mkPod("a", port("", v1.ProtocolTCP, 81)), others: others, want: rejected("NodePorts", msg)},
		{name: "another specific IP", pod: mkPod("a", port("10.0.0.1", v1.ProtocolTCP, 81)), others: others, want: admitted()},
		{name: "other protocol", pod: mkPod("a", port("", v1.ProtocolTCP, 53)), others: others, want: admitted()},
		{name: "same protocol", pod: mkPod("a", port("", v1.ProtocolUDP, 53)), others: others, want: rejected("NodePorts", msg)},
		{name: "sidecar port", pod: mkPod("a", initPort(true, 80)), others: others, want: rejected("NodePorts", msg)},
		{name: "init container port is released", pod: mkPod("a", initPort(false, 80)), others: others, want: admitted()},
		{name: "against a sidecar's port", pod: mkPod("a", port("", "", 90)), others: []*v1.Pod{mkPod("s", initPort(true, 90))},
			want: rejected("NodePorts", msg)},
		{name: "finished pod holds none", pod: mkPod("a", port("", "", 80)),
			others: []*v1.Pod{mkPod("done", port("", "", 80), phase(v1.PodSucceeded))}, want: admitted()},
		{name: "the pod itself", pod: web, others: others, want: admitted()},
	})
}

func TestTaints(t *testing.T) {
	const msg = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
	tainted := func(taints ...v1.Taint) *v1.Node {
		n := node()
		n.Spec.Taints = taints
		return n
	}
	noExec := v1.Taint{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoExecute}
	noSched := v1.Taint{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}
	runCases(t, []admitCase{
		{name: "NoExecute untolerated", node: tainted(noExec), pod: mkPod("a"), want: rejected("TaintToleration", msg)},
		{name: "NoSchedule is the scheduler's", node: tainted(noSched), pod: mkPod("a"), want: admitted()},
		{name: "PreferNoSchedule too", node: tainted(v1.Taint{Key: "k", Effect: v1.TaintEffectPreferNoSchedule}), pod: mkPod("a"), want: admitted()},
		{name: "tolerated by value", node: tainted(noExec), pod: mkPod("a", tolerate(v1.Toleration{Key: "dedicated",
			Operator: v1.TolerationOpEqual, Value: "db", Effect: v1.TaintEffectNoExecute})), want: admitted()},
		{name: "tolerated by Exists", node: tainted(noExec), pod: mkPod("a", tolerate(v1.Toleration{Operator: v1.TolerationOpExists})), want: admitted()},
		{name: "other value", node: tainted(noExec), pod: mkPod("a", tolerate(v1.Toleration{Key: "dedicated",
			Operator: v1.TolerationOpEqual, Value: "web"})), want: rejected("TaintToleration", msg)},
		{name: "toleration for another effect", node: tainted(noExec), pod: mkPod("a", tolerate(v1.Toleration{Key: "dedicated",
			Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})), want: rejected("TaintToleration", msg)},
		{name: "static pods are exempt", node: tainted(noExec), pod: mkPod("a", static), want: admitted()},
		{name: "critical API pods are not", node: tainted(noExec), pod: mkPod("a", priority(2_000_000_000)), want: rejected("TaintToleration", msg)},
	})
}

func TestResources(t *testing.T) {
	busy := mkPod("busy", requests("cpu", "1800m", "memory", "1Gi"))
	gpus := mkPod("gpus", requests("example.com/gpu", "1"))
	others := []*v1.Pod{busy, gpus}
	runCases(t, []admitCase{
		{name: "fits", pod: mkPod("a", requests("cpu", "200m", "memory", "3Gi")), others: others, want: admitted()},
		{name: "no requests", pod: mkPod("a"), others: others, want: admitted()},
		{name: "cpu", pod: mkPod("a", requests("cpu", "500m")), others: others,
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 1800, capacity: 2000")},
		{name: "memory", pod: mkPod("a", requests("memory", "3Gi")), others: []*v1.Pod{busy, mkPod("m", requests("memory", "1"))},
			want: rejected("OutOfmemory", "Node didn't have enough resource: memory, requested: 3221225472, used: 1073741825, capacity: 4294967296")},
		{name: "ephemeral storage", pod: mkPod("a", requests("ephemeral-storage", "11Gi")),
			want: rejected("OutOfephemeral-storage", "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240")},
		{name: "extended resource", pod: mkPod("a", requests("example.com/gpu", "2")), others: others,
			want: rejected("OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 2, used: 1, capacity: 2")},
		{name: "extended resource the node does not advertise", pod: mkPod("a", requests("example.com/fpga", "1")), want: admitted()},
		{name: "huge pages the node does not have", pod: mkPod("a", requests("hugepages-2Mi", "2Mi")),
			want: rejected("OutOfhugepages-2Mi", "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0")},
		{name: "app containers add up", pod: mkPod("a", requests("cpu", "100m"), container("b", "cpu", "150m")), others: others,
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000")},
		{name: "the largest init container counts", pod: mkPod("a", requests("cpu", "100m"), initContainer("i", false, "cpu", "300m")),
			others: others, want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 300, used: 1800, capacity: 2000")},
		{name: "a sidecar adds to the app containers", pod: mkPod("a", requests("cpu", "100m"), initContainer("s", true, "cpu", "150m")),
			others: others, want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000")},
		{name: "overhead", pod: mkPod("a", requests("cpu", "100m"), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "150m") }),
			others: others, want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 250, used: 1800, capacity: 2000")},
		{name: "others' overhead counts too", pod: mkPod("a", requests("cpu", "300m")),
			others: []*v1.Pod{mkPod("o", requests("cpu", "1500m"), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "300m") })},
			want:   rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 300, used: 1800, capacity: 2000")},
		{name: "others' init containers count too", pod: mkPod("a", requests("cpu", "300m")),
			others: []*v1.Pod{mkPod("o", requests("cpu", "100m"), initContainer("i", false, "cpu", "1800m"))},
			want:   rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 300, used: 1800, capacity: 2000")},
		{name: "finished pods free theirs", pod: mkPod("a", requests("cpu", "500m")),
			others: []*v1.Pod{mkPod("f", requests("cpu", "1800m"), phase(v1.PodFailed))}, want: admitted()},
		{name: "mirror pods are counted through their static pod", pod: mkPod("a", requests("cpu", "500m")),
			others: []*v1.Pod{mkPod("m", requests("cpu", "1800m"), func(p *v1.Pod) { p.Annotations["kubernetes.io/config.mirror"] = "h" })},
			want:   admitted()},
		{name: "pods", pod: mkPod("a"), others: []*v1.Pod{mkPod("w"), mkPod("x"), mkPod("y"), mkPod("z")},
			want: rejected("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 4, capacity: 4")},
		{name: "pods, not counting finished ones", pod: mkPod("a"),
			others: []*v1.Pod{mkPod("w", phase(v1.PodSucceeded)), mkPod("x"), mkPod("y"), mkPod("z")}, want: admitted()},
		{name: "the first shortage is reported", pod: mkPod("a", requests("cpu", "500m", "memory", "4Gi")), others: others,
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 1800, capacity: 2000")},
		{name: "resources before affinity", pod: mkPod("a", requests("cpu", "500m"), selector("zone", "b")), others: others,
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 1800, capacity: 2000")},
	})
}

func TestCriticalPods(t *testing.T) {
	busy := []*v1.Pod{mkPod("busy", requests("cpu", "1800m"))}
	runCases(t, []admitCase{
		{name: "static pod short of cpu", pod: mkPod("a", static, requests("cpu", "500m")), others: busy, want: admitted()},
		{name: "system-critical API pod short of cpu", pod: mkPod("a", priority(2_000_000_000), requests("cpu", "500m")),
			others: busy, want: admitted()},
		{name: "high but not critical priority", pod: mkPod("a", priority(1_000_000_000), requests("cpu", "500m")), others: busy,
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 1800, capacity: 2000")},
		{name: "static pod keeps the other checks", pod: mkPod("a", static, requests("cpu", "500m"), selector("zone", "b")), others: busy,
			want: rejected("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")},
		{name: "static pod on a used port", pod: mkPod("a", static, port("", "", 80)), others: []*v1.Pod{mkPod("w", port("", "", 80))},
			want: rejected("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")},
	})
}

func TestPreempt(t *testing.T) {
	busy := []*v1.Pod{mkPod("busy", requests("cpu", "1800m"))}
	pod := mkPod("a", static, requests("cpu", "500m"))
	var asked []InsufficientResource
	h := New(func() (*v1.Node, error) { return node(), nil }, func() v1.ResourceList { return alloc })
	h.Preempt = func(_ *v1.Pod, short []InsufficientResource) error { asked = short; return nil }
	if got := h.Admit(pod, busy); !got.Admit {
		t.Fatalf("Admit = %+v after a successful preemption", got)
	}
	want := InsufficientResource{Name: v1.ResourceCPU, Requested: 500, Used: 1800, Capacity: 2000}
	if len(asked) != 1 || asked[0] != want {
		t.Fatalf("Preempt asked for %+v, want %+v", asked, want)
	}

	h.Preempt = func(*v1.Pod, []InsufficientResource) error { return errors.New("no pod to evict") }
	got := h.Admit(pod, busy)
	if want := rejected("UnexpectedAdmissionError",
		"Unexpected error while attempting to recover from admission failure: no pod to evict"); got != want {
		t.Fatalf("Admit = %+v, want %+v", got, want)
	}

	asked = nil
	h.Preempt = func(_ *v1.Pod, short []InsufficientResource) error { asked = short; return nil }
	if got := h.Admit(mkPod("b", static, requests("cpu", "100m")), busy); !got.Admit || asked != nil {
		t.Fatalf("a fitting pod: Admit = %+v, Preempt asked for %+v", got, asked)
	}
}

func TestOS(t *testing.T) {
	other := "windows"
	if goruntime.GOOS == other {
		other = "linux"
	}
	withLabel := func(os string) podOpt { return func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: os} } }
	withOS := func(os string) podOpt { return func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.OSName(os)} } }
	staleNode := node()
	delete(staleNode.Labels, v1.LabelOSStable)
	runCases(t, []admitCase{
		{name: "label matches", pod: mkPod("a", withLabel(goruntime.GOOS)), want: admitted()},
		{name: "label matches this OS when the Node lacks it", node: staleNode, pod: mkPod("a", withLabel(goruntime.GOOS)), want: admitted()},
		{name: "label differs", pod: mkPod("a", withLabel(other)), want: rejected("PodOSSelectorNodeLabelDoesNotMatch",
			"Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")},
		{name: "field matches", pod: mkPod("a", withOS(goruntime.GOOS)), want: admitted()},
		{name: "field differs", pod: mkPod("a", withOS(other)), want: rejected("PodOSNotSupported",
			"Failed to admit pod as the OS field doesn't match node OS")},
		{name: "checked before resources", pod: mkPod("a", withOS(other), requests("cpu", "3")), want: rejected("PodOSNotSupported",
			"Failed to admit pod as the OS field doesn't match node OS")},
	})
}

func TestNodeUnknown(t *testing.T) {
	h := New(func() (*v1.Node, error) { return nil, errors.New("not yet") }, func() v1.ResourceList { return alloc })
	want := rejected("InvalidNodeInfo", "Kubelet cannot get node info.")
	if got := h.Admit(mkPod("a"), nil); got != want {
		t.Fatalf("Admit = %+v, want %+v", got, want)
	}
}

func TestLocalNodeAndAnyWay(t *testing.T) {
	taint := v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}
	local := LocalNode(nodeName, map[string]string{"zone": "a", v1.LabelHostname: "override"}, []v1.Taint{taint})
	want := map[string]string{v1.LabelHostname: "override", v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH,
		"beta.kubernetes.io/os": goruntime.GOOS, "beta.kubernetes.io/arch": goruntime.GOARCH, "zone": "a"}
	if local.Name != nodeName || len(local.Labels) != len(want) || len(local.Spec.Taints) != 1 || local.Spec.Taints[0] != taint {
		t.Fatalf("LocalNode = %+v", local)
	}
	for k, v := range want {
		if local.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q", k, local.Labels[k], v)
		}
	}

	registered := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"zone": "b"}}}
	cases := []struct {
		name string
		get  NodeFunc
		want *v1.Node
	}{
		{"registered", func() (*v1.Node, error) { return registered, nil }, registered},
		{"not seen yet", func() (*v1.Node, error) { return nil, errors.New(`node "node-a" not found`) }, local},
		{"standalone", nil, local},
	}
	for _, c := range cases {
		if got, err := AnyWay(c.get, local)(); err != nil || got != c.want {
			t.Errorf("%s: AnyWay = %v, %v", c.name, got, err)
		}
	}
}
