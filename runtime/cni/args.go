package cni

import (
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// The pod annotations the kubelet documents for traffic shaping, in bits per second.
const (
	IngressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
	EgressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
)

// Bandwidth limits outside this range are rejected, as the kubelet does: below 1k the shaper
// starves the pod, above 1P the value is surely a typo.
var (
	minBandwidth = resource.MustParse("1k")
	maxBandwidth = resource.MustParse("1P")
)

// podArgs are the CNI_ARGS the Kubernetes CNI conventions define; IgnoreUnknown lets plugins that
// do not know them run anyway.
func podArgs(pod PodNetwork) [][2]string {
	return [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", pod.Namespace},
		{"K8S_POD_NAME", pod.Name},
		{"K8S_POD_INFRA_CONTAINER_ID", pod.SandboxID},
		{"K8S_POD_UID", pod.UID},
	}
}

// capabilityArgs builds the runtimeConfig values of the CNI conventions document. libcni hands
// each key only to plugins that declare the capability, so unused keys cost nothing.
func capabilityArgs(pod PodNetwork) (map[string]any, error) {
	caps := map[string]any{}
	if pm := portMappings(pod.PortMappings); len(pm) > 0 {
		caps["portMappings"] = pm
	}
	bw, err := bandwidth(pod.Annotations)
	if err != nil {
		return nil, err
	}
	if bw != nil {
		caps["bandwidth"] = bw
	}
	if d := pod.DNS; d != nil && len(d.Servers)+len(d.Searches)+len(d.Options) > 0 {
		caps["dns"] = map[string][]string{"servers": d.Servers, "searches": d.Searches, "options": d.Options}
	}
	if pod.CgroupParent != "" {
		caps["cgroupPath"] = pod.CgroupParent
	}
	return caps, nil
}

type portMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// portMappings keeps only mappings with a host port: a containerPort alone is informational in
// Kubernetes and needs no rule.
func portMappings(in []*runtimeapi.PortMapping) []portMapping {
	var out []portMapping
	for _, p := range in {
		if p == nil || p.HostPort <= 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol.String())
		out = append(out, portMapping{
			HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIp,
		})
	}
	return out
}

// bandwidth turns the annotations into the bandwidth plugin's runtimeConfig. The burst is as large
// as the plugin accepts, as containerd and CRI-O pass it: the annotations carry only a rate.
func bandwidth(ann map[string]string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, a := range []struct{ key, rate, burst string }{
		{IngressBandwidthAnnotation, "ingressRate", "ingressBurst"},
		{EgressBandwidthAnnotation, "egressRate", "egressBurst"},
	} {
		v, ok := ann[a.key]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q: %v: %w", a.key, v, err, errdefs.ErrInvalidArgument)
		}
		if q.Cmp(minBandwidth) < 0 || q.Cmp(maxBandwidth) > 0 {
			return nil, fmt.Errorf("annotation %s=%q is outside [%s, %s]: %w",
				a.key, v, minBandwidth.String(), maxBandwidth.String(), errdefs.ErrInvalidArgument)
		}
		out[a.rate] = uint64(q.Value())
		out[a.burst] = math.MaxUint32
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
