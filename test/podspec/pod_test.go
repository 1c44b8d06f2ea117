package podspec

func podArea() area {
	return area{title: "Pod", intro: "The pod as a whole: its life, its names, its network and namespaces.", rows: []row{
		h("spec.restartPolicy", "Always, OnFailure or Never decide whether ended containers and failed init containers "+
			"start again, and the pod's phase", "agent/kuberuntime.TestComputePodActions", "agent/status.TestGeneratePhase"),
		h("spec.terminationGracePeriodSeconds", "the grace of a kill: preStop hooks, then StopContainer's timeout "+
			"with what is left (at least 2 s)", "agent/kuberuntime.TestKillPodRunsPreStopThenStopsWithGrace"),
		h("spec.activeDeadlineSeconds", "past it (from status.startTime) the pod is killed and ends Failed, reason DeadlineExceeded",
			"agent/podsync.TestActiveDeadlineFailsAndKillsPod", "agent/podsync.TestPastActiveDeadlineUsesAPIStartTime",
			"agent/syncloop.TestHousekeepingPassWakesPodsPastTheirDeadline"),
		h("spec.dnsPolicy", "ClusterFirst (the cluster DNS, <ns>.svc.<domain> searches, ndots:5; the host's resolver "+
			"for hostNetwork pods or without clusterDNS), ClusterFirstWithHostNet, Default (the host's resolv.conf), "+
			"None, as the sandbox's DNS config", sandboxProof, "agent/kuberuntime.TestGenerateConfigs"),
		h("spec.dnsConfig.nameservers", "appended to the sandbox's DNS servers, duplicates left out; past 3 in all the "+
			"rest are cut with a DNSConfigForming warning event, as the kubelet's", sandboxProof,
			"agent/kuberuntime.TestPodDNSFitsResolverLimits"),
		h("spec.dnsConfig.searches", "appended to the search domains, duplicates left out; past 32 paths or 2048 "+
			"characters, the last are cut, and paths longer than 253 dropped, with a DNSConfigForming warning event",
			sandboxProof, "agent/kuberuntime.TestPodDNSFitsResolverLimits"),
		h("spec.dnsConfig.options[].name", "added to the resolver options; one the policy already sets (ndots) takes "+
			"the pod's value", sandboxProof, "agent/kuberuntime.TestPodDNSFitsResolverLimits"),
		h("spec.dnsConfig.options[].value", "written as name:value", sandboxProof),
		h("spec.hostname", "the sandbox's hostname (default: the pod's name, cut to 63 characters) and its /etc/hosts line",
			sandboxProof, "agent/kuberuntime.TestEtcHostsManaged", "agent/integration.TestPodFeaturesOnNodeletRuntime"),
		h("spec.subdomain", "the pod's FQDN <hostname>.<subdomain>.<ns>.svc.<domain> in its /etc/hosts",
			"agent/kuberuntime.TestEtcHostsManaged"),
		h("spec.setHostnameAsFQDN", "the sandbox's hostname is the pod's FQDN (<hostname>.<subdomain>.<namespace>.svc.<clusterDomain>); longer than 64 characters, the sandbox is not made: FailedCreatePodSandBox \"failed to construct FQDN from pod hostname and cluster domain, FQDN ... is too long\"", "agent/kuberuntime.TestSandboxHostname", "agent/kuberuntime.TestSandboxNotMadeWithTooLongFQDN", "agent/kuberuntime.TestHostnameAsFQDNOnTheRealRuntime"),
		ref("spec.hostnameOverride", "\"spec.hostnameOverride: Forbidden: is not supported on this node\": static pods are "+
			"refused when read, pods from the API server at admission (Failed, reason HostnameOverrideNotSupported); the "+
			"kubelet 1.34 leaves the HostnameOverride gate off", unsupportedProof...),
		h("spec.hostAliases[].ip", "a line of the pod's /etc/hosts (also for hostNetwork pods, after the node's)",
			"agent/kuberuntime.TestEtcHostsManaged", "agent/kuberuntime.TestEtcHostsHostNetwork"),
		h("spec.hostAliases[].hostnames", "the names on that line", "agent/kuberuntime.TestEtcHostsManaged"),
		h("spec.hostNetwork", "the sandbox shares the node's network namespace (NamespaceMode NODE), the node's /etc/hosts "+
			"is used, no hostname is set", sandboxProof, "agent/kuberuntime.TestEtcHostsHostNetwork",
			"agent/integration.TestPodFeaturesOnContainerd"),
		h("spec.hostPID", "the containers share the node's PID namespace", sandboxProof, containerProof),
		h("spec.hostIPC", "the sandbox shares the node's IPC namespace", sandboxProof, containerProof),
		h("spec.shareProcessNamespace", "the containers share one PID namespace (NamespaceMode POD)",
			"agent/kuberuntime.TestEphemeralContainerNamespaces", containerProof),
		h("spec.hostUsers", "false runs the pod in a user namespace of its own: 65536 host IDs per pod, above the host's first 65536 (or the kubelet user's subordinate IDs), never another pod's, kept in pods/<uid>/userns across restarts; volumes are idmapped mounts; on a runtime handler without user namespaces the sandbox is not made: FailedCreatePodSandBox \"can't set `spec.hostUsers: false`, runtime does not support user namespaces\"", "agent/userns.TestRangesAreDisjointAndAboveTheHostsIDs", "agent/userns.TestRangesSurviveARestart", "agent/kuberuntime.TestHostUsersFalseGetsItsRangeEverywhere", "agent/kuberuntime.TestHostUsersFalseOnTheRealRuntime", "agent/kuberuntime.TestHostUsersFalseRefusedOnAHandlerWithoutUserNamespaces", "agent.TestHostUsersFalseStaticPods", "agent/podvalidation.TestHostUsersFalse", "runtime/cri.TestUsernsMountsIdmapped"),
		h("spec.serviceAccountName", "the account whose token serviceAccountToken projections request (TokenRequest); "+
			"fieldRef spec.serviceAccountName", volumeProof, containerProof),
		na("spec.serviceAccount", "deprecated alias of serviceAccountName, which the API server fills from it"),
		na("spec.automountServiceAccountToken", "the API server's ServiceAccount admission adds the kube-api-access volume "+
			"or not; the agent mounts what the spec lists"),
		h("spec.imagePullSecrets[].name", "registry credentials for the pod's pulls (kubernetes.io/dockerconfigjson and dockercfg secrets)",
			"agent/credentials.TestKeyring", "agent/kuberuntime.TestPullUsesPodCredentials"),
		h("spec.enableServiceLinks", "false leaves out the Services' docker-link variables (the kubernetes Service's stay)",
			"agent/kuberuntime.TestServiceEnvVars", "agent/kuberuntime.TestServiceEnvOwnNamespaceKubernetesWins"),
		h("spec.runtimeClassName", "the sandbox's CRI runtime handler, from the RuntimeClass (the API server's, or the "+
			"manifest folder's standalone); its overhead and scheduling are admitted into static pods",
			"agent/kuberuntime.TestRuntimeClassPicksHandler", "agent/kuberuntime.TestSandboxRuntimeHandler",
			"agent/podsource.TestManifestDirSourceAdmitsPodsAgainstItsRuntimeClasses", "test/e2e.TestUpRuntimeClassFromTheFolder"),
		h("spec.overhead", "counted at admission, added to the pod cgroup's limits and sent with the sandbox config",
			"agent/kuberuntime.TestSandboxConfigCarriesPodResources", "agent/cm/qos.TestPodLimits", "agent/admission.TestResources"),
		h("spec.readinessGates[].conditionType", "the pod is Ready only when each named condition in its status is True "+
			"(reason ReadinessGatesNotReady otherwise); a condition changed in the API server wakes the pod's worker at once, "+
			"and the agent's status writes keep the conditions others set", "agent/status.TestReadinessGatesAndOthersConditions",
			"agent.TestReadinessGateChangeReachesReady", "agent/syncloop.TestReconcileWakesWorkerOnReadinessGateChange",
			"agent/status.TestStatusWriteKeepsConditionsSetMeanwhile", "agent/integration.TestClusterReadinessGateAndExtendedResources"),
		ref("spec.resources", "pod-level resources are not applied to the QoS class, the containers' limits and eviction, "+
			"so a pod setting them does not run: \"spec.resources: Forbidden: pod-level resources are not supported on the "+
			"node\" (static pods, when read; pods from the API server at admission, Failed with the kubelet's reason "+
			"PodLevelResourcesNotSupported)", unsupportedProof...),
		ref("spec.resourceClaims[]", "refused at admission: reason FailedPrepareDynamicResources, \"Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim ...\" (nodelet has no DRA)", "agent/admission.TestAdmitResourceClaims", "agent/admission.TestChainRefusesResourceClaims"),
		h("spec.os.name", "another OS than this node's is rejected at admission (PodOSNotSupported)", "agent/admission.TestOS"),
	}}
}

func schedulingArea() area {
	return area{title: "Scheduling", intro: "The kubelet re-checks at admission what would make a pod wrong on this node " +
		"(its general predicates); the rest is the scheduler's.", rows: []row{
		h("spec.nodeName", "a pod bound to another node is rejected (NodeName); the API source watches only pods bound "+
			"here; fieldRef spec.nodeName", "agent/admission.TestNodeName", "agent/podsource.TestAPISource"),
		h("spec.nodeSelector", "every label must match the Node's at admission (NodeAffinity)", "agent/admission.TestNodeAffinity"),
		h("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchExpressions[].{key|operator|values}",
			"terms are ORed, expressions ANDed, against the Node's labels at admission (NodeAffinity)", "agent/admission.TestNodeAffinity"),
		h("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchFields[].{key|operator|values}",
			"metadata.name against the Node's name at admission", "agent/admission.TestNodeAffinity"),
		na("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[]", "scoring for the scheduler"),
		na("spec.affinity.podAffinity", "the scheduler's; the kubelet does not re-check inter-pod affinity"),
		na("spec.affinity.podAntiAffinity", "the scheduler's; the kubelet does not re-check inter-pod anti-affinity"),
		h("spec.tolerations[].{key|operator|value|effect}", "the Node's NoExecute taints must be tolerated at admission "+
			"(TaintToleration; static pods are exempt); pods tolerating node.kubernetes.io/memory-pressure are admitted under it",
			"agent/admission.TestTaints", "agent/eviction.TestAdmitUnderPressureFollowsKubeletRules"),
		na("spec.tolerations[].tolerationSeconds", "the taint eviction controller's: it evicts when the time runs out"),
		na("spec.schedulerName", "which scheduler binds the pod"),
		na("spec.priorityClassName", "the API server's Priority admission turns it into spec.priority, which the agent reads"),
		h("spec.priority", "system-critical priority (2000000000 and above) makes a pod critical: a resource shortage does "+
			"not reject it and eviction spares it; eviction ranks by it",
			"agent/admission.TestCriticalPods", "agent/eviction.TestRankMemoryExceedsRequestsThenPriorityThenUsageAboveRequests",
			"agent/eviction.TestHardMemoryThresholdEvictsOnePodPerPassSkippingCriticalOnes"),
		na("spec.preemptionPolicy", "whether the scheduler may preempt for the pod"),
		na("spec.topologySpreadConstraints[]", "the scheduler's placement across topology domains"),
		na("spec.schedulingGates[]", "a gated pod is not bound to any node, so no kubelet sees it"),
		na("spec.schedulingGroup", "the scheduler's gang scheduling"),
	}}
}
