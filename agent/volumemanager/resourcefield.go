package volumemanager

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrNoAllocatable: a resourceFieldRef needs the node's allocatable (the container sets no such
// limit) and none was given. Showing 0 instead would tell the container it may use nothing.
var ErrNoAllocatable = errors.New("node allocatable unknown")

// ResourceFieldValue is what a downward API resourceFieldRef (env, downwardAPI or projected file)
// shows: the container's limit or request divided by the divisor and rounded up, as the kubelet
// computes it. A cpu, memory or ephemeral-storage limit that is unset (or zero) is the node's
// allocatable amount; if allocatable is nil that is ErrNoAllocatable. A resource the node does not
// report (no allocatable ephemeral-storage, say) stays 0, as with the kubelet.
func ResourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	var c *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == ref.ContainerName {
				c = &list[i]
			}
		}
	}
	if c == nil {
		if ref.ContainerName != "" || len(pod.Spec.Containers) != 1 {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
		c = &pod.Spec.Containers[0]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	name := v1.ResourceName(res)
	switch {
	case name == v1.ResourceCPU, name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage,
		strings.HasPrefix(res, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	var q resource.Quantity
	switch kind {
	case "limits":
		q = c.Resources.Limits[name]
		// Hugepages are never overcommitted, so a container using them always has a limit.
		if q.IsZero() && !strings.HasPrefix(res, v1.ResourceHugePagesPrefix) {
			if allocatable == nil {
				return "", fmt.Errorf("resourceFieldRef %s of container %q: no limit set and %w", ref.Resource, c.Name, ErrNoAllocatable)
			}
			q = allocatable[name]
		}
	case "requests":
		q = c.Resources.Requests[name]
	default:
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	if name == v1.ResourceCPU {
		// In millis, so a divisor of "1m" works.
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
