package kuberuntime

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Annotations as the kubelet writes them on CRI objects (the labels are kubecontainer's). They are the agent's only
// memory of which pod a sandbox or container belongs to, so an agent restarted after SIGKILL rebuilds
// its view from the runtime alone; crictl users and other tools read the same keys.
const (
	AnnotationContainerHash          = "io.kubernetes.container.hash"
	AnnotationRestartCount           = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMsgPolicy   = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationPreStopHandler         = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts         = "io.kubernetes.container.ports"

	// podInfraContainerName is what the kubelet puts in io.kubernetes.container.name of a sandbox.
	podInfraContainerName = "POD"
)

func newPodLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[kubecontainer.LabelPodName] = pod.Name
	labels[kubecontainer.LabelPodNamespace] = pod.Namespace
	labels[kubecontainer.LabelPodUID] = string(pod.UID)
	return labels
}

func newSandboxLabels(pod *v1.Pod) map[string]string {
	return newPodLabels(pod)
}

func newContainerLabels(c *v1.Container, pod *v1.Pod) map[string]string {
	return map[string]string{
		kubecontainer.LabelPodName:       pod.Name,
		kubecontainer.LabelPodNamespace:  pod.Namespace,
		kubecontainer.LabelPodUID:        string(pod.UID),
		kubecontainer.LabelContainerName: c.Name,
	}
}

func newContainerAnnotations(c *v1.Container, pod *v1.Pod, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:          strconv.FormatUint(HashContainer(c), 16),
		AnnotationRestartCount:           strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath: c.TerminationMessagePath,
		AnnotationTerminationMsgPolicy:   string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	return a
}

// labeledInfo is what a container's labels and annotations say about it.
type labeledInfo struct {
	PodName, PodNamespace string
	PodUID                types.UID
	ContainerName         string
	Hash                  uint64
	RestartCount          int
	GracePeriod           *int64
	PreStop               *v1.LifecycleHandler
}

func parseContainerLabels(labels, annotations map[string]string) labeledInfo {
	info := labeledInfo{
		PodName:       labels[kubecontainer.LabelPodName],
		PodNamespace:  labels[kubecontainer.LabelPodNamespace],
		PodUID:        types.UID(labels[kubecontainer.LabelPodUID]),
		ContainerName: labels[kubecontainer.LabelContainerName],
	}
	info.Hash, _ = strconv.ParseUint(annotations[AnnotationContainerHash], 16, 64)
	info.RestartCount, _ = strconv.Atoi(annotations[AnnotationRestartCount])
	if s, ok := annotations[AnnotationPodGracePeriod]; ok {
		if g, err := strconv.ParseInt(s, 10, 64); err == nil {
			info.GracePeriod = &g
		}
	}
	if s, ok := annotations[AnnotationPreStopHandler]; ok {
		h := &v1.LifecycleHandler{}
		if json.Unmarshal([]byte(s), h) == nil {
			info.PreStop = h
		}
	}
	return info
}

// HashContainer fingerprints the parts of a container spec whose change needs a new container.
// Resources are left out because they can be changed in place.
func HashContainer(c *v1.Container) uint64 {
	cp := c.DeepCopy()
	cp.Resources = v1.ResourceRequirements{}
	b, _ := json.Marshal(cp)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
