package podspec

const ephemeralRefusal = "an ephemeral container setting it does not start: CreateContainerConfigError " +
	"\"invalid ephemeral container: spec.ephemeralContainers[<i>].<field>: Forbidden: cannot be set for an Ephemeral Container\""

func containersArea() area {
	return area{title: "Containers", intro: "Fields of app containers (`containers`), init containers and sidecars " +
		"(`initContainers`; a sidecar is one with `restartPolicy: Always`) and debug containers (`ephemeralContainers`). " +
		"Static pods may not have ephemeral containers: \"spec.ephemeralContainers: Forbidden: static pods may not have " +
		"ephemeral containers\".", rows: []row{
		h(anyContainer+".name", "the CRI container name and its status, logs and events",
			"agent/kuberuntime.TestSyncPodStartsSandboxAndContainers", "agent/kuberuntime.TestComputePodActionsEphemeral"),
		h(anyContainer+".image", "pulled per imagePullPolicy and run; kept as the CRI user-specified image",
			"agent/kuberuntime.TestImagePullPolicies", "agent/kuberuntime.TestSyncPodStartsSandboxAndContainers"),
		h(anyContainer+".imagePullPolicy", "Always, IfNotPresent, Never (default Always for :latest or no tag), with pull back-off",
			"agent/kuberuntime.TestImagePullPolicies", "agent/kuberuntime.TestImagePullBackOff", "agent/images.TestDefaultsAndPolicy"),
		h(anyContainer+".command", "the entrypoint, $(VAR) expanded from the container's env ($$ escapes)", "agent/kuberuntime.TestGenerateConfigs"),
		h(anyContainer+".args", "the arguments, $(VAR) expanded", "agent/kuberuntime.TestSyncPodStartsSandboxAndContainers", containerProof),
		h(anyContainer+".workingDir", "the process's working directory", containerProof),
		h(anyContainer+".{stdin|stdinOnce|tty}", "the CRI container's stdin, stdinOnce and tty (attach reaches them)",
			containerProof, "agent/server.TestExecAttachLogsReachAnEphemeralContainer"),
		h(anyContainer+".terminationMessagePath", "a file of the agent's mounted there; its content (at most 4096 bytes) "+
			"becomes the terminated state's message", "agent/kuberuntime.TestTerminationMessageFileMountedAndReadBack",
			"agent/kuberuntime.TestTerminationMessageAndHostsOnTheRealRuntime"),
		h(anyContainer+".terminationMessagePolicy", "FallbackToLogsOnError takes the log's tail when the file is empty "+
			"and the container failed", "agent/kuberuntime.TestTerminationMessageFallbackToLogs",
			"agent/kuberuntime.TestTerminationMessageFallbackOnlyOnFailure"),

		// Environment.
		h(anyContainer+".env[].name", "a variable of the container's environment; later ones win", "agent/kuberuntime.TestGenerateConfigs"),
		h(anyContainer+".env[].value", "its value, $(VAR) expanded from the variables before it", "agent/kuberuntime.TestGenerateConfigs"),
		h(anyContainer+".env[].valueFrom.fieldRef.fieldPath", "metadata.name, namespace, uid, labels['k'], "+
			"annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP(s), status.hostIP(s)",
			"agent/kuberuntime.TestSyncPodStartsSandboxAndContainers", "agent/integration.TestPodFeaturesOnNodeletRuntime", containerProof),
		na(anyContainer+".env[].valueFrom.fieldRef.apiVersion", "the API version of fieldPath; only v1 is valid, which the "+
			"API server (and static pod validation) checks"),
		h(anyContainer+".env[].valueFrom.resourceFieldRef.{containerName|resource|divisor}", "the named container's "+
			"limit or request, divided and rounded up; an unset limit shows the node's allocatable",
			"agent/kuberuntime.TestEnvResourceFieldRef"),
		h(anyContainer+".env[].valueFrom.configMapKeyRef.{name|key}", "the key of the config map in the pod's namespace; "+
			"a missing one is CreateContainerConfigError", "agent/kuberuntime.TestConfigGenerationFailuresAreCreateContainerConfigError",
			containerProof, "agent/integration.TestClusterOnNodeletRuntime"),
		h(anyContainer+".env[].valueFrom.configMapKeyRef.optional", "a missing map or key leaves the variable out", containerProof),
		h(anyContainer+".env[].valueFrom.secretKeyRef.{name|key}", "the key of the secret in the pod's namespace", containerProof),
		h(anyContainer+".env[].valueFrom.secretKeyRef.optional", "a missing secret or key leaves the variable out", containerProof),
		ref(anyContainer+".env[].valueFrom.fileKeyRef", "static pods: \"spec.containers[<i>].env[<j>].valueFrom.fileKeyRef: "+
			"Forbidden: is not supported for static pods\"; other pods: CreateContainerConfigError \"env <name>: "+
			"valueFrom.fileKeyRef is not supported\"", "test/podspec.TestFileKeyRefIsRefused"),
		h(anyContainer+".envFrom[].{configMapRef|secretRef}.name", "every key of the config map or secret becomes a variable",
			"agent/kuberuntime.TestEnvFromReachesTheContainerConfig", "agent/kuberuntime.TestEnvFromOnTheRealRuntime"),
		h(anyContainer+".envFrom[].{configMapRef|secretRef}.optional", "a missing config map or secret is skipped", containerProof),
		h(anyContainer+".envFrom[].prefix", "put before each key", "agent/kuberuntime.TestEnvFromReachesTheContainerConfig"),

		// Mounts.
		h(anyContainer+".volumeMounts[].name", "the pod volume mounted", "agent/kuberuntime.TestGenerateConfigs", "agent/integration.TestWorkloadOnNodeletRuntime"),
		h(anyContainer+".volumeMounts[].mountPath", "where, in the container", "agent/kuberuntime.TestGenerateConfigs", "agent/integration.TestWorkloadOnNodeletRuntime"),
		h(anyContainer+".volumeMounts[].readOnly", "a read-only mount (secret, configMap, downwardAPI and projected are always read-only)",
			containerProof, "agent/volumemanager.TestVolumesInRealContainers"),
		h(anyContainer+".volumeMounts[].mountPropagation", "None, HostToContainer or Bidirectional as the CRI mount's propagation", containerProof),
		h(anyContainer+".volumeMounts[].recursiveReadOnly", "Enabled and IfPossible (where the pod's runtime handler reports recursive read-only mounts) make every submount read-only too; Enabled on a handler without them is CreateContainerConfigError \"failed to resolve recursive read-only mode: volume ... requested recursive read-only mode, but it is not supported by the runtime\"; reported in the container status' volumeMounts", "agent/kubecontainer.TestResolveRecursiveReadOnly", "agent/kuberuntime.TestMountsRecursiveReadOnlyPerHandler", "agent/kuberuntime.TestRecursiveReadOnlyOnTheRealRuntime", "agent/kuberuntime.TestRecursiveReadOnlyRefusedOnTheRealRuntime", "agent/status.TestVolumeMountStatuses", "agent/podsync.TestStatusReportsRecursiveReadOnly"),
		h(appOrInit+".volumeMounts[].{subPath|subPathExpr}", "a path inside the volume, opened without following symlinks "+
			"out of it and bind-mounted; subPathExpr expands $(VAR) from the env first",
			"agent/kuberuntime.TestSubPathsGoThroughTheVolumeManager", "agent/volumemanager.TestVolumesInRealContainers",
			"agent/volumemanager.TestSubPathSymlinkEscape", "agent/integration.TestWorkloadOnNodeletRuntime"),
		ref("spec.ephemeralContainers[].volumeMounts[].{subPath|subPathExpr}", ephemeralRefusal,
			"agent/podvalidation.TestValidateEphemeralContainersRefuses"),
		h(anyContainer+".volumeDevices[].{name|devicePath}", "the claim's device node at devicePath (read, write, mknod; read only for a "+
			"claim read-only), as the kubelet's block volumes: local PVs of volumeMode Block, and CSI ones (staged and "+
			"published at the kubelet's volumeDevices paths, the published file the device); a claim of volumeMode "+
			"Filesystem named here, or a Block one in volumeMounts, fails the mount with the kubelet's words (\"volume <name> "+
			"has volumeMode Filesystem, but is specified in volumeDevices\"); a claim not set up as a block device keeps the "+
			"container from being created (CreateContainerConfigError \"cannot find volume \\\"<name>\\\" to pass into "+
			"container \\\"<container>\\\"\"); hostPath PVs of volumeMode Block are refused naming the PV",
			"agent/volumemanager.TestBlockClaims", "agent/kuberuntime.TestVolumeDevices", "agent/csi.TestBlockVolume", "test/podspec.TestVolumeDevicesNeedABlockClaim",
			"agent/integration.TestClusterCSIOnNodeletRuntime"),

		// Ports.
		h(appOrInit+".ports[].containerPort", "app containers' ports become the sandbox's port mappings (as with the "+
			"kubelet, init containers' do not)", "agent/kuberuntime.TestGenerateConfigs", sandboxProof),
		h(appOrInit+".ports[].{hostPort|hostIP|protocol}", "the mapping's host side; host ports of app containers and "+
			"sidecars must be free on the node at admission (NodePorts)", "agent/kuberuntime.TestGenerateConfigs",
			"agent/admission.TestNodePorts", sandboxProof),
		h(appOrInit+".ports[].name", "named ports resolve probes' and hooks' httpGet and tcpSocket ports",
			"agent/prober.TestHandlers", "agent/integration.TestWorkloadOnNodeletRuntime"),
		ref("spec.ephemeralContainers[].ports[]", ephemeralRefusal, "agent/podvalidation.TestValidateEphemeralContainersRefuses",
			"agent/kuberuntime.TestSyncPodRefusesInvalidEphemeralContainer"),

		// Resources.
		h(appOrInit+".resources.{limits|requests}", "cpu: CRI shares and CFS quota, the CPU manager's exclusive CPUs; memory: "+
			"the CRI limit and the OOM score; all summed into the pod cgroup (hugepages-<size> only there) and counted at "+
			"admission (extended resources the node advertises too); a device plugin's resource: the devices its plugin "+
			"allocates at admission, its Allocate answer (env, mounts, device nodes, annotations, CDI names) in the container's config; "+
			"ephemeral-storage by eviction",
			containerProof, "agent/cm/qos.TestPodLimits", "agent/admission.TestResources", "agent/eviction.TestStorageOverLimit",
			"agent/cm/cpumanager.TestStaticPolicy", "agent/cm/devicemanager.TestDevicesAllocatedAtAdmissionAndGivenToTheContainer",
			"agent/kuberuntime.TestDevicesAppliedAsTheKubeletDoes", "agent/integration.TestClusterDevicePlugin"),
		ref(appOrInit+".resources.claims[]", "refused at admission: reason FailedPrepareDynamicResources, \"Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim ...\" (nodelet has no DRA)", "agent/admission.TestAdmitResourceClaims", "agent/admission.TestChainRefusesResourceClaims"),
		h(appOrInit+".resizePolicy[].{resourceName|restartPolicy}", "an in-place resize of that resource restarts the "+
			"container when RestartContainer", "agent/kuberuntime.TestSyncPodRestartsForResizePolicy"),
		ref("spec.ephemeralContainers[].{resources|resizePolicy[]}", ephemeralRefusal, "agent/podvalidation.TestValidateEphemeralContainersRefuses"),

		// Restart policy.
		h("spec.initContainers[].restartPolicy", "Always makes a sidecar: started in order without waiting for it to end, restarted, probed; at pod termination it is stopped after the app containers and the sidecars started after it, in reverse order, within the grace period (2 s at least), as the kubelet does", "agent/kuberuntime.TestComputePodActionsSidecarLiveness", "agent/status.TestSidecarConditions", "agent/integration.TestWorkloadOnNodeletRuntime", "agent/kuberuntime.TestTerminationOrder", "agent/kuberuntime.TestKillPodStopsSidecarsAfterApps", "agent/kuberuntime.TestSidecarStopsAfterTheAppOnTheRealRuntime"),
		ref("spec.containers[].restartPolicy", "\"spec.containers[<i>].restartPolicy: Forbidden: may not be set for "+
			"non-init containers\": static pods are refused when read, pods from the API server at admission (Failed, reason "+
			"ContainerRestartRulesNotSupported): the kubelet 1.34 leaves the ContainerRestartRules gate off", unsupportedProof...),
		ref("spec.ephemeralContainers[].restartPolicy", "CreateContainerConfigError \"invalid ephemeral container: "+
			"spec.ephemeralContainers[<i>].restartPolicy: Forbidden: may not be set for non-init containers\"",
			"agent/podvalidation.TestValidateEphemeralContainersRefuses"),
		ref(appOrInit+".restartPolicyRules[]", "\"spec.containers[<i>].restartPolicyRules: Forbidden: is not supported on "+
			"this node\" (initContainers alike): static pods are refused when read, pods from the API server at admission "+
			"(Failed, reason ContainerRestartRulesNotSupported; the ContainerRestartRules gate is off in the kubelet 1.34)",
			unsupportedProof...),
		ref("spec.ephemeralContainers[].restartPolicyRules[]", ephemeralRefusal),

		h("spec.ephemeralContainers[].targetContainerName", "the debug container joins that container's PID namespace "+
			"(CRI NamespaceMode TARGET)", "agent/kuberuntime.TestSyncPodStartsEphemeralContainerInTargetPIDNamespace",
			"agent/kuberuntime.TestEphemeralContainerNamespaces"),
	}}
}
