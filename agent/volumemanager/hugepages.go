package volumemanager

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// isHugePagesMedium: HugePages, or HugePages-<size>.
func isHugePagesMedium(m v1.StorageMedium) bool {
	return m == v1.StorageMediumHugePages || strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))
}

// hugePageSize is the page size of a hugetlbfs emptyDir, as the kubelet picks it: the size a
// HugePages-<size> medium names, which a container must request; for HugePages, the one size the
// pod's containers request (several sizes are an error). No huge page request fails the mount.
func hugePageSize(medium v1.StorageMedium, pod *v1.Pod) (resource.Quantity, error) {
	var want *resource.Quantity
	if medium != v1.StorageMediumHugePages {
		q, err := resource.ParseQuantity(strings.TrimPrefix(string(medium), string(v1.StorageMediumHugePagesPrefix)))
		if err != nil {
			return resource.Quantity{}, fmt.Errorf("medium %s: invalid huge page size: %w", medium, err)
		}
		want = &q
	}
	var found *resource.Quantity
	for _, c := range append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
		// Requests equal limits for huge pages, so requests are enough.
		for name := range c.Resources.Requests {
			size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(size)
			if err != nil {
				return resource.Quantity{}, fmt.Errorf("resource %s: invalid huge page size: %w", name, err)
			}
			switch {
			case want != nil:
				if q.Cmp(*want) == 0 {
					found = &q
				}
			case found != nil && found.Cmp(q) != 0:
				return resource.Quantity{}, fmt.Errorf("medium: %s can't be used if container requests multiple huge page sizes", medium)
			default:
				found = &q
			}
		}
	}
	if found == nil {
		return resource.Quantity{}, fmt.Errorf("medium %s: hugePages storage requested, but there is no resource request for huge pages", medium)
	}
	return *found, nil
}
