package server

import (
	v1 "k8s.io/api/core/v1"
)

// PodList adapts a function listing pods with their statuses to PodSource, finding one by a scan.
type PodList func() []*v1.Pod

func (f PodList) Pods() []*v1.Pod { return f() }

func (f PodList) Pod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range f() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}
