package podspec

const (
	probe      = appOrInit + ".{livenessProbe|readinessProbe|startupProbe}"
	hook       = appOrInit + ".lifecycle.{postStart|preStop}"
	probeProof = "test/podspec.TestProbeTimingFields"
	hookProof  = "test/podspec.TestHookFields"
)

func probesArea() area {
	return area{title: "Probes and lifecycle hooks", intro: "App containers and sidecars are probed and run hooks; " +
		"the API server (and static pod validation) refuses probes and hooks on other init containers: " +
		"\"spec.initContainers[<i>].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always\".",
		rows: []row{
			h(probe+".exec.command", "run in the container through CRI ExecSync; exit 0 passes",
				"agent/prober.TestReadinessAndLiveness", "agent/prober.TestProbesInRealContainer"),
			h(probe+".httpGet.{path|port|scheme}", "GET on the pod IP (port by number or name; HTTPS without "+
				"verification; redirects on the same host followed); 200–399 passes",
				"agent/prober.TestHandlers", "agent/prober.TestProbesOverThePodNetwork"),
			h(probe+".httpGet.host", "the host asked instead of the pod IP", "agent/prober.TestReadinessAndLiveness"),
			h(probe+".httpGet.httpHeaders[].{name|value}", "sent with the request", "agent/prober.TestHandlers"),
			h(probe+".tcpSocket.{port|host}", "a TCP connection that opens passes",
				"agent/prober.TestStartupProbeGatesReadiness", "agent/prober.TestProbesInRealContainer"),
			h(probe+".grpc.{port|service}", "grpc.health.v1 Check on the pod IP; SERVING passes",
				"agent/prober.TestHandlers", "agent/prober.TestGRPCProbeInRealContainer"),
			h(probe+".initialDelaySeconds", "no probe before the container has run that long", probeProof),
			h(probe+".timeoutSeconds", "each probe's deadline (default 1 s), also the ExecSync timeout", probeProof),
			h(probe+".periodSeconds", "how often it runs (default 10 s)",
				"agent/prober.TestReadinessAndLiveness", "agent/prober.TestProbesInRealContainer"),
			h(probe+".successThreshold", "successes in a row before a readiness probe passes (liveness and startup "+
				"probes must keep 1)", probeProof),
			h(probe+".failureThreshold", "failures in a row before it fails (default 3): liveness and startup restart "+
				"the container, readiness makes it not Ready",
				"agent/prober.TestReadinessAndLiveness", "agent/prober.TestUnhealthyEventAndProbeGracePeriod"),
			h(appOrInit+".{livenessProbe|startupProbe}.terminationGracePeriodSeconds", "the grace of the kill that "+
				"probe's failure causes, over the pod's", "agent/prober.TestUnhealthyEventAndProbeGracePeriod",
				"agent/kuberuntime.TestLivenessKillUsesTheProbesGracePeriod"),
			na(appOrInit+".readinessProbe.terminationGracePeriodSeconds", "a failed readiness probe kills nothing; the "+
				"API server and static pod validation refuse it: \"must not be set for readinessProbes\""),
			h(probe, "startup gates liveness and readiness; liveness and startup failures restart the container "+
				"(Unhealthy and Killing events), readiness sets the Ready condition",
				"agent/prober.TestStartupProbeGatesReadiness", "agent/integration.TestWorkloadOnNodeletRuntime",
				"agent/prober.TestSidecarsAreProbed"),

			h(hook+".exec.command", "run through CRI ExecSync: postStart after the start (a failure kills the container, "+
				"FailedPostStartHook), preStop before a kill within the grace period (FailedPreStopHook)",
				"agent/kuberuntime.TestPostStartHook", "agent/kuberuntime.TestKillPodRunsPreStopThenStopsWithGrace",
				"agent/lifecycle.TestHooksInRealContainer", "agent/integration.TestPodFeaturesOnNodeletRuntime"),
			h(hook+".httpGet.{path|port|httpHeaders[].name|httpHeaders[].value}", "GET on the pod IP; a Host header sets the "+
				"request's host", "agent/lifecycle.TestRun"),
			h(hook+".httpGet.{host|scheme}", "another host than the pod IP; HTTPS without verification", hookProof),
			ref(hook+".tcpSocket", "the hook fails, as with the kubelet (the field is deprecated): event "+
				"\"PostStartHook failed: lifecycle hook failed: tcpSocket is not supported as a lifecycle hook\" "+
				"(PreStopHook for preStop); a failed postStart kills the container", "agent/lifecycle.TestRun"),
			h(hook+".sleep.seconds", "waits that long, cut short (without failing) by the end of the grace period",
				"agent/lifecycle.TestSleepCutByGracePeriod", hookProof),
			ref(appOrInit+".lifecycle.stopSignal", "as the kubelet 1.34 with its default gates (ContainerStopSignals off) "+
				"would not send it, the pod does not run: static pods \"spec.containers[<i>].lifecycle.stopSignal: Forbidden: "+
				"is not supported on this node\"; pods from the API server are rejected at admission (Failed, reason "+
				"ContainerStopSignalsNotSupported) with the same message", unsupportedProof...),
			ref("spec.ephemeralContainers[].{livenessProbe|readinessProbe|startupProbe|lifecycle}", ephemeralRefusal,
				"agent/podvalidation.TestValidateEphemeralContainersRefuses"),
		}}
}
