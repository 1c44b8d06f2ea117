package config

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// applyDefaults makes a pod read from a file or URL runnable: it fills what the apiserver would have
// defaulted, names it after the node as the kubelet does (<name>-<node>), and gives it a UID derived
// from its content, the node and its origin, so the same manifest keeps the same UID across restarts
// of the agent (its running containers are found again) and a changed manifest gets a new one.
func applyDefaults(pod *v1.Pod, source, origin, nodeName string) error {
	if pod.Name == "" {
		return errors.New("pod has no metadata.name")
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
	return validate(pod)
}

func hasTag(image string) bool {
	last := image[strings.LastIndex(image, "/")+1:]
	return strings.Contains(last, ":")
}

// validate catches what would otherwise fail deep in the runtime with a less clear message.
func validate(pod *v1.Pod) error {
	var errs []string
	if msgs := validation.IsDNS1123Subdomain(pod.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("metadata.name %q: %s", pod.Name, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(pod.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("metadata.namespace %q: %s", pod.Namespace, strings.Join(msgs, "; ")))
	}
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, "spec.containers: at least one container is required")
	}
	names := map[string]bool{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
				errs = append(errs, fmt.Sprintf("container name %q: %s", c.Name, strings.Join(msgs, "; ")))
			}
			if names[c.Name] {
				errs = append(errs, fmt.Sprintf("container name %q: duplicate", c.Name))
			}
			names[c.Name] = true
			if c.Image == "" {
				errs = append(errs, fmt.Sprintf("container %q: image is required", c.Name))
			}
		}
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, fmt.Sprintf("spec.restartPolicy %q: must be Always, OnFailure or Never", pod.Spec.RestartPolicy))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, ", "))
	}
	return nil
}
