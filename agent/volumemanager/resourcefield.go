package volumemanager

import (
	"fmt"
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceFieldValue is what a downwardAPI resourceFieldRef (file or env) shows: the container's
// limit or request divided by the divisor and rounded up, as the kubelet computes it. An unset limit
// falls back to the node's allocatable amount (allocatable may be nil: then 0).
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
	var q resource.Quantity
	var name v1.ResourceName
	switch ref.Resource {
	case "limits.cpu", "limits.memory", "limits.ephemeral-storage":
		name = v1.ResourceName(ref.Resource[len("limits."):])
		if l, ok := c.Resources.Limits[name]; ok {
			q = l
		} else if a, ok := allocatable[name]; ok {
			q = a
		}
	case "requests.cpu", "requests.memory", "requests.ephemeral-storage":
		name = v1.ResourceName(ref.Resource[len("requests."):])
		q = c.Resources.Requests[name]
	default:
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	if name == v1.ResourceCPU {
		// In millis, so a divisor of "1m" works; whole units of the divisor, rounded up.
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
