package agentconfig

// toConfig fills the Config the agent reads today from a loaded configuration, while its callers
// move to the file format's fields.
func toConfig(l loaded, serving bool) Config {
	kc := &l.kc
	c := Config{
		Kubelet: l.kc,
		Options: l.opts,
		Derived: Derived{NodeIPs: l.nodeIPs},
	}
	if serving {
		c.Serving = Serving{Address: kc.Address, Port: int(kc.Port), PortSet: l.portSet,
			TLSCertFile: kc.TLSCertFile, TLSPrivateKeyFile: kc.TLSPrivateKeyFile, ServerTLSBootstrap: kc.ServerTLSBootstrap,
			Authentication: kc.Authentication, Authorization: kc.Authorization}
	}
	return c
}
