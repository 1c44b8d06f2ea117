package agentconfig

import (
	"reflect"
	"strings"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletConfiguration writes the configuration the agent runs with in the kubelet's format, for
// /configz: flags and file merged, defaults filled, as the kubelet shows its own there. A fixed
// field (docs/kubeletconfig.md) holds the value it accepts besides being left out, which says what
// the agent does; one that accepts only being left out stays so. Like the kubelet's, it carries
// no apiVersion or kind: the kubelet converts its internal configuration without setting them.
func (c Config) KubeletConfiguration() kubeletv1beta1.KubeletConfiguration {
	kc := c.Kubelet
	// A fixed field the file set to an accepted value shows the value that says what the agent does.
	v := reflect.ValueOf(&kc).Elem()
	rules := kubeletConfigFields.Get()
	for name, i := range kubeletConfigIndex.Get() {
		if !rules[name].honoured {
			v.Field(i).SetZero()
		}
	}
	fillFixed(&kc)
	kc.Logging.Format = "text"
	kc.TypeMeta = metav1.TypeMeta{}
	// evictionHard is the merged set: mergeDefaultEvictionSettings has done its work.
	kc.MergeDefaultEvictionSettings = nil
	if p := kc.MaxParallelImagePulls; p != nil && *p <= 0 {
		kc.MaxParallelImagePulls = nil // no bound, as left out
	}
	// As agent.New decides: standalone, the HTTPS API is served only when a port was asked for.
	kc.EnableServer = new(kc.Port != 0 && (c.PortSet || c.Kubeconfig != ""))
	kc.CgroupsPerQOS = new(c.PodsCgroup != "")
	// The file's cgroupRoot is the parent of kubepods; the agent keeps the kubepods cgroup itself
	// (--cgroup-root names it), so a root not ending in kubepods is shown as it is.
	kc.CgroupRoot = strings.TrimSuffix(c.PodsCgroup, DefaultCgroupRoot)
	return kc
}

// fillFixed sets every fixed field that accepts a value to its first accepted one; it returns the
// fields whose value does not fit their type (a mistake in kubeletConfigFields, which the test catches).
func fillFixed(kc *kubeletv1beta1.KubeletConfiguration) (unfit []string) {
	v := reflect.ValueOf(kc).Elem()
	index := kubeletConfigIndex.Get()
	for name, rule := range kubeletConfigFields.Get() {
		if rule.honoured || rule.accept != nil || len(rule.allowed) == 0 {
			continue
		}
		if !setTo(v.Field(index[name]), reflect.ValueOf(rule.allowed[0])) {
			unfit = append(unfit, name)
		}
	}
	return unfit
}

// setTo sets f (through a pointer, which it allocates) to val, deep-copied so the rules' values
// are never shared.
func setTo(f, val reflect.Value) bool {
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		if !setTo(p.Elem(), val) {
			return false
		}
		f.Set(p)
		return true
	}
	if val.Kind() != f.Kind() || !val.Type().ConvertibleTo(f.Type()) {
		return false
	}
	f.Set(deepCopy(val).Convert(f.Type()))
	return true
}

// deepCopy copies the pointers inside a struct value (crashLoopBackOff's maxContainerRestartPeriod).
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	}
	return v
}
