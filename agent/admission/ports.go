package admission

import (
	v1 "k8s.io/api/core/v1"
)

const bindAll = "0.0.0.0"

type protoPort struct {
	protocol string
	port     int32
}

// hostPorts are the host ports in use, by host IP.
type hostPorts map[string]map[protoPort]bool

func key(p v1.ContainerPort) (ip string, pp protoPort) {
	ip, proto := p.HostIP, string(p.Protocol)
	if ip == "" {
		ip = bindAll
	}
	if proto == "" {
		proto = string(v1.ProtocolTCP)
	}
	return ip, protoPort{proto, p.HostPort}
}

func (h hostPorts) add(p v1.ContainerPort) {
	ip, pp := key(p)
	if h[ip] == nil {
		h[ip] = map[protoPort]bool{}
	}
	h[ip][pp] = true
}

// conflicts reports whether p cannot be bound: 0.0.0.0 overlaps every address, in both directions.
// Other addresses (:: included, as in the scheduler) only meet themselves and 0.0.0.0.
func (h hostPorts) conflicts(p v1.ContainerPort) bool {
	ip, pp := key(p)
	if ip == bindAll {
		for _, used := range h {
			if used[pp] {
				return true
			}
		}
		return false
	}
	return h[bindAll][pp] || h[ip][pp]
}

// podHostPorts are the host ports a pod holds for its whole life: its app containers' and its
// sidecars' (restartable init containers). Other init containers have exited before the app
// containers start, so their ports never compete with anyone's.
func podHostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	add := func(cs []v1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					out = append(out, p)
				}
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

// fitsPorts reports whether every host port pod asks for is free of the active pods' ones. Two
// containers of pod itself asking for the same port are left to validation, as in the scheduler.
func fitsPorts(pod *v1.Pod, active []*v1.Pod) bool {
	want := podHostPorts(pod)
	if len(want) == 0 {
		return true
	}
	used := hostPorts{}
	for _, p := range active {
		for _, port := range podHostPorts(p) {
			used.add(port)
		}
	}
	for _, p := range want {
		if used.conflicts(p) {
			return false
		}
	}
	return true
}
