package manifest

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/agent/podvalidation"
)

// ErrInvalidPod: a pod from a file or URL fails the API server's validation.
var ErrInvalidPod = errors.New("invalid pod")

// Annotations the kubelet writes on pods from files and URLs: where the pod came from, and the
// hash that is also its UID.
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
)

// DefaultAll admits (when admit is set), defaults and validates every decoded pod of one manifest
// read from source (the kubernetes.io/config.source value) at origin (a file path or URL). One bad
// pod refuses the whole manifest, so a half-applied file never runs.
func DefaultAll(pods []*v1.Pod, source, origin, nodeName string, admit func(*v1.Pod) error) error {
	for i, p := range pods {
		if admit != nil {
			if err := admit(p); err != nil {
				return fmt.Errorf("pod %d (%s): %w", i, p.Name, err)
			}
		}
		if err := Default(p, source, fmt.Sprintf("%s#%d", origin, i), nodeName); err != nil {
			return fmt.Errorf("pod %d: %w", i, err)
		}
	}
	return nil
}

// Default makes a pod read from a file or URL runnable: it fills what the apiserver would have
// defaulted, names it after the node as the kubelet does (<name>-<node>), and gives it a UID derived
// from its content, the node and its origin, so the same manifest keeps the same UID across restarts
// of the agent (its running containers are found again) and a changed manifest gets a new one.
func Default(pod *v1.Pod, source, origin, nodeName string) error {
	if pod.Name == "" {
		return fmt.Errorf("%w: %w", ErrInvalidPod, field.Required(field.NewPath("metadata", "name"), ""))
	}
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	pod.Spec.NodeName = nodeName
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	for _, list := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			c := &list[i]
			if c.TerminationMessagePath == "" {
				c.TerminationMessagePath = v1.TerminationMessagePathDefault
			}
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = v1.TerminationMessageReadFile
			}
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = v1.PullIfNotPresent
				if !strings.Contains(c.Image, "@") && (strings.HasSuffix(c.Image, ":latest") || !hasTag(c.Image)) {
					c.ImagePullPolicy = v1.PullAlways
				}
			}
			for j := range c.Ports {
				if c.Ports[j].Protocol == "" {
					c.Ports[j].Protocol = v1.ProtocolTCP
				}
			}
		}
	}
	if pod.UID == "" {
		b, err := json.Marshal(pod)
		if err != nil {
			return err
		}
		h := md5.New()
		h.Write(b)
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "%s:%s", source, origin)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotation] = source
	return Validate(pod)
}

func hasTag(image string) bool {
	last := image[strings.LastIndex(image, "/")+1:]
	return strings.Contains(last, ":")
}

// Validate refuses, before any of its fields becomes a path, a pod the API server would refuse.
func Validate(pod *v1.Pod) error {
	if errs := podvalidation.ValidateStaticPod(pod); len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidPod, errs.ToAggregate())
	}
	return nil
}
