package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func rcPod(runtimeClass string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox:1"}}}}
	if runtimeClass != "" {
		p.Spec.RuntimeClassName = &runtimeClass
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestRuntimeClassAdmit(t *testing.T) {
	gvisor := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m", "memory", "64Mi")},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "gvisor"},
			Tolerations: []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}}}
	plain := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "crun"}
	folder := RuntimeClasses{"gvisor": gvisor, "plain": plain}
	show := func(p *v1.Pod) string {
		var ts []string
		for _, t := range p.Spec.Tolerations {
			ts = append(ts, fmt.Sprintf("%s/%s/%s/%s", t.Key, t.Operator, t.Value, t.Effect))
		}
		return fmt.Sprintf("overhead=%v selector=%v tolerations=%v", resources(p.Spec.Overhead), p.Spec.NodeSelector, ts)
	}
	for _, tc := range []struct {
		name    string
		rcs     RuntimeClasses
		pod     *v1.Pod
		want    string // the pod after admission, or the error
		wantErr bool
	}{
		{name: "overhead and scheduling from the RuntimeClass", rcs: folder, pod: rcPod("gvisor"),
			want: "overhead=cpu=250m,memory=64Mi selector=map[sandbox:gvisor] tolerations=[sandbox/Exists//NoExecute]"},
		{name: "the same overhead set by the pod is kept", rcs: folder, pod: rcPod("gvisor", func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "65536Ki", "cpu", "0.25") }),
			want: "overhead=cpu=250m,memory=64Mi selector=map[sandbox:gvisor] tolerations=[sandbox/Exists//NoExecute]"},
		{name: "a different overhead is refused", rcs: folder, pod: rcPod("gvisor", func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "1Mi") }),
			want: "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead", wantErr: true},
		{name: "an overhead without a RuntimeClass defining one is refused", rcs: folder, pod: rcPod("plain", func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "1Mi") }),
			want: "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead", wantErr: true},
		{name: "an overhead without any RuntimeClass is refused", rcs: nil, pod: rcPod("", func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "1Mi") }),
			want: "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead", wantErr: true},
		{name: "a name the folder does not define is refused", rcs: folder, pod: rcPod("kata"),
			want: `pod rejected: RuntimeClass "kata" not found`, wantErr: true},
		{name: "no RuntimeClass in the folder: the name is left to be the handler", rcs: RuntimeClasses{}, pod: rcPod("runsc"),
			want: "overhead= selector=map[] tolerations=[]"},
		{name: "the pod's own selector is merged with the RuntimeClass's", rcs: folder,
			pod:  rcPod("gvisor", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd", "sandbox": "gvisor"} }),
			want: "overhead=cpu=250m,memory=64Mi selector=map[disk:ssd sandbox:gvisor] tolerations=[sandbox/Exists//NoExecute]"},
		{name: "a conflicting selector is refused", rcs: folder,
			pod:  rcPod("gvisor", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"sandbox": "kata"} }),
			want: "pod rejected: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata", wantErr: true},
		{name: "a pod's toleration the RuntimeClass's covers is left out", rcs: folder,
			pod: rcPod("gvisor", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpEqual, Value: "x", Effect: v1.TaintEffectNoExecute},
					{Key: "other", Operator: v1.TolerationOpExists}}
			}),
			want: "overhead=cpu=250m,memory=64Mi selector=map[sandbox:gvisor] tolerations=[other/Exists// sandbox/Exists//NoExecute]"},
		{name: "a RuntimeClass without overhead or scheduling changes nothing", rcs: folder, pod: rcPod("plain"),
			want: "overhead= selector=map[] tolerations=[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rcs.Admit(tc.pod)
			if tc.wantErr {
				if err == nil || err.Error() != tc.want || !errors.Is(err, ErrPodRejected) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := show(tc.pod); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func resources(l v1.ResourceList) string {
	var out []string
	for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := l[n]; ok {
			out = append(out, fmt.Sprintf("%s=%s", n, q.String()))
		}
	}
	return strings.Join(out, ",")
}

func TestRuntimeClassHandler(t *testing.T) {
	if h, err := (RuntimeClasses{}).Handler("runsc"); err != nil || h != "runsc" {
		t.Errorf("no RuntimeClasses: %q %v, want the name itself", h, err)
	}
	rcs := RuntimeClasses{"gvisor": {ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}}
	if h, err := rcs.Handler("gvisor"); err != nil || h != "runsc" {
		t.Errorf("gvisor: %q %v, want runsc", h, err)
	}
	if _, err := rcs.Handler("runsc"); !apierrors.IsNotFound(err) {
		t.Errorf("a handler's name once the folder defines RuntimeClasses: %v, want NotFound", err)
	}
}

func TestDecodeRuntimeClasses(t *testing.T) {
	const pod = "kind: Pod\nmetadata: {name: web}\nspec: {runtimeClassName: gvisor, containers: [{name: a, image: b}]}\n"
	rc := func(body string) string {
		return "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\n" + body
	}
	pods, rcs, err := DecodeAll([]byte(rc("handler: runsc\noverhead: {podFixed: {memory: 64Mi}}\n") + "---\n" + pod))
	if err != nil || len(pods) != 1 || len(rcs) != 1 || rcs[0].Handler != "runsc" || rcs[0].Overhead.PodFixed.Memory().String() != "64Mi" {
		t.Fatalf("pods %v, rcs %v, err %v", pods, rcs, err)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"no handler":                 {rc(""), "handler: Invalid value"},
		"a handler with a /":         {rc("handler: a/b\n"), "handler: Invalid value"},
		"negative overhead":          {rc("handler: runsc\noverhead: {podFixed: {cpu: -1}}\n"), "overhead.limits[cpu]: Invalid value"},
		"v1beta1":                    {"apiVersion: node.k8s.io/v1beta1\nkind: RuntimeClass\nmetadata: {name: x}\nhandler: runsc\n", "want node.k8s.io/v1"},
		"bad selector":               {rc("handler: runsc\nscheduling: {nodeSelector: {'a b': c}}\n"), "scheduling.nodeSelector"},
		"a toleration twice":         {rc("handler: runsc\nscheduling: {tolerations: [{key: a, operator: Exists}, {key: a, operator: Exists}]}\n"), "Duplicate value"},
		"bad toleration":             {rc("handler: runsc\nscheduling: {tolerations: [{key: a, operator: Exists, value: b}]}\n"), "value must be empty"},
		"a name not a DNS subdomain": {"apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: UPPER}\nhandler: runsc\n", "metadata.name: Invalid value"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := DecodeAll([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
	// A manifest URL's body may not carry RuntimeClasses: only the folder's apply to every pod.
	if _, err := Decode([]byte(rc("handler: runsc\n"))); !errors.Is(err, ErrRuntimeClassOutsideFolder) {
		t.Errorf("Decode: %v, want ErrRuntimeClassOutsideFolder", err)
	}
}

func TestRuntimeClassIsPartOfTheUID(t *testing.T) {
	uid := func(rc *nodev1.RuntimeClass) string {
		p := rcPod("gvisor")
		if err := DefaultAll([]*v1.Pod{p}, "file", "/m/web.yaml", "n", RuntimeClasses{"gvisor": rc}.Admit); err != nil {
			t.Fatal(err)
		}
		return string(p.UID)
	}
	a := uid(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc", Overhead: &nodev1.Overhead{PodFixed: rl("memory", "64Mi")}})
	b := uid(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc", Overhead: &nodev1.Overhead{PodFixed: rl("memory", "128Mi")}})
	if a == b {
		t.Error("a changed overhead kept the pod's UID: a running pod's overhead would change under it")
	}
}
