package server

import (
	v1 "k8s.io/api/core/v1"
)

// PodList adapts a "list my pods with their status" function (the Agent's Pods) to PodSource.
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
