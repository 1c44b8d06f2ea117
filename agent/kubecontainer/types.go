// Package kubecontainer holds the agent's runtime-neutral view of pods and containers as observed
// through CRI, under the kubelet's name for it (pkg/kubelet/container, imported as kubecontainer
// there too). Everything the planner, PLEG and the
// status manager need to agree on lives here, and nothing here talks to a runtime.
package kubecontainer

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// State is a container's state as the agent understands it.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// StateFromCRI maps a CRI container state.
func StateFromCRI(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	}
	return StateUnknown
}

// Status is one container as observed (a CRI ContainerStatus plus the labels the agent wrote).
type Status struct {
	ID           string
	Name         string
	State        State
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Image        string
	ImageID      string // the image's ID (config digest) as the runtime reports it
	ImageRef     string // repo@digest when the runtime knows it
	Hash         uint64 // hash of the container spec it was created from
	RestartCount int
	Reason       string
	Message      string
	// Resources are the cpu and memory the runtime reports the container has; nil when it
	// reports none.
	Resources *ContainerResources
	// User is the identity the container's process runs with, as the runtime reports it (uid,
	// gid and the supplementary groups it actually got); nil when it reports none.
	User *v1.ContainerUser
}

// ContainerResources are a container's resources as a runtime reports them (from the Linux cgroup
// figures of CRI's ContainerStatus.resources); a nil field was not reported.
type ContainerResources struct {
	CPURequest  *resource.Quantity
	CPULimit    *resource.Quantity
	MemoryLimit *resource.Quantity
}

// PodStatus is everything observed about one pod in the runtime.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	IPs       []string
	// SandboxStatuses are newest first.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// ContainerStatuses are newest first (by creation), so the first match by name is the latest attempt.
	ContainerStatuses []*Status
	TimeStamp         time.Time
}

// FindContainerStatusByName returns the newest attempt of the named container, or nil.
func (s *PodStatus) FindContainerStatusByName(name string) *Status {
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ContainersByName returns every attempt of the named container, newest first.
func (s *PodStatus) ContainersByName(name string) []*Status {
	var out []*Status
	if s == nil {
		return out
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// RunningContainers lists the containers in StateRunning.
func (s *PodStatus) RunningContainers() []*Status {
	var out []*Status
	for _, c := range s.ContainerStatuses {
		if c.State == StateRunning {
			out = append(out, c)
		}
	}
	return out
}

// ReadySandbox returns the newest sandbox when it is ready, else nil.
func (s *PodStatus) ReadySandbox() *runtimeapi.PodSandboxStatus {
	if s == nil || len(s.SandboxStatuses) == 0 {
		return nil
	}
	if s.SandboxStatuses[0].State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return s.SandboxStatuses[0]
	}
	return nil
}

// RuntimePod is a pod as found in the runtime by its labels, without its desired spec. Housekeeping
// uses it to find pods that are running but no longer wanted.
type RuntimePod struct {
	ID         types.UID
	Name       string
	Namespace  string
	SandboxIDs []string
	Containers []RuntimeContainer
}

// RuntimeContainer is a container found in the runtime.
type RuntimeContainer struct {
	ID    string
	Name  string
	State State
}

// GetPodFullName is the kubelet's "name_namespace" key.
func GetPodFullName(pod *v1.Pod) string {
	return BuildPodFullName(pod.Name, pod.Namespace)
}

// BuildPodFullName joins name and namespace like the kubelet does.
func BuildPodFullName(name, namespace string) string {
	return name + "_" + namespace
}

// FormatPod is for log lines.
func FormatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s/%s(%s)", pod.Namespace, pod.Name, pod.UID)
}
