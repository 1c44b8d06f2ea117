package agentconfig

// toConfig fills the Config the agent reads today from a loaded configuration, while its callers
// move to the file format's fields.
func toConfig(l loaded, serving bool) Config {
	return Config{Kubelet: l.kc, Options: l.opts, Derived: Derived{NodeIPs: l.nodeIPs, PortSet: l.portSet}}
}
