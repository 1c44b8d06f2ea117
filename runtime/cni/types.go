package cni

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// PodNetwork is what the runtime knows of a pod when it asks for its network.
type PodNetwork struct {
	Namespace, Name, UID string
	SandboxID            string
	NetNSPath            string
	PortMappings         []*runtimeapi.PortMapping
	Annotations          map[string]string
	DNS                  *runtimeapi.DNSConfig // may be nil
	CgroupParent         string
}

// Result is what the pod got from the network: its IPs, the primary first.
type Result struct {
	IPs []string
}
