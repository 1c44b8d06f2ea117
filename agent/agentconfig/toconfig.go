package agentconfig

// toConfig fills the Config the agent reads today from a loaded configuration, while its callers
// move to the file format's fields.
func toConfig(l loaded, serving bool) Config {
	kc := &l.kc
	c := Config{
		Kubelet: l.kc,
		Options: l.opts,
		Derived: Derived{NodeIPs: l.nodeIPs},

		EvictionHard:                     kc.EvictionHard,
		EvictionSoft:                     kc.EvictionSoft,
		EvictionSoftGracePeriod:          kc.EvictionSoftGracePeriod,
		EvictionMinimumReclaim:           kc.EvictionMinimumReclaim,
		EvictionMaxPodGracePeriod:        kc.EvictionMaxPodGracePeriod,
		EvictionPressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
		KernelMemcgNotification:          kc.KernelMemcgNotification,

		SystemReserved:         kc.SystemReserved,
		KubeReserved:           kc.KubeReserved,
		EnforceNodeAllocatable: kc.EnforceNodeAllocatable,
		SystemReservedCgroup:   kc.SystemReservedCgroup,
		KubeReservedCgroup:     kc.KubeReservedCgroup,
		PodPidsLimit:           *kc.PodPidsLimit,

		CPUManagerPolicy:          kc.CPUManagerPolicy,
		CPUManagerPolicyOptions:   kc.CPUManagerPolicyOptions,
		CPUManagerReconcilePeriod: kc.CPUManagerReconcilePeriod.Duration,
		ReservedSystemCPUs:        kc.ReservedSystemCPUs,
		TopologyManagerPolicy:     kc.TopologyManagerPolicy,
		TopologyManagerScope:      kc.TopologyManagerScope,

		FailSwapOn:   *kc.FailSwapOn,
		FailCgroupV1: *kc.FailCgroupV1,
	}
	if serving {
		c.Serving = Serving{Address: kc.Address, Port: int(kc.Port), PortSet: l.portSet,
			TLSCertFile: kc.TLSCertFile, TLSPrivateKeyFile: kc.TLSPrivateKeyFile, ServerTLSBootstrap: kc.ServerTLSBootstrap,
			Authentication: kc.Authentication, Authorization: kc.Authorization}
	}
	return c
}
