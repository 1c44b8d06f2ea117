package podspec

const (
	sandboxProof   = "test/podspec.TestSandboxConfigFromPodFields"
	containerProof = "test/podspec.TestContainerConfigFromContainerFields"
	volumeProof    = "test/podspec.TestAPIVolumeFieldsReachTheFiles"
	refusalProof   = "test/podspec.TestUnsupportedVolumeIsRefused"
)

// unsupportedProof are the tests of the fields refused for static pods and at admission.
var unsupportedProof = []string{"agent/podvalidation.TestValidateStaticPodRefusesUnsupportedFields",
	"agent/admission.TestUnsupportedFields"}

func metaArea() area {
	return area{title: "Object metadata and annotations", rows: []row{
		h("metadata.name", "the pod's name in the CRI sandbox metadata and labels, its log folder and its status; "+
			"a static pod's gets the node name appended (<name>-<node>), as the kubelet's",
			"agent/kuberuntime.TestSyncPodStartsSandboxAndContainers", "agent/podsource.TestManifestDirSource"),
		na("metadata.generateName", "the API server makes a name from it; a static pod is named by metadata.name"),
		h("metadata.namespace", "the pod's namespace in CRI, logs and status (static pods: `default` when left out)",
			"agent/kuberuntime.TestSyncPodStartsSandboxAndContainers"),
		na("metadata.selfLink", "deprecated; the API server no longer sets it"),
		h("metadata.uid", "the sandbox's UID and the pods/<uid> folders; a static pod's is derived from its content, "+
			"or, when given, must be one safe path element",
			"agent/kuberuntime.TestSyncPodStartsSandboxAndContainers", "agent/podsource.TestUIDIsStableAcrossReads",
			"agent/podvalidation.TestValidateUIDAcceptsSafeElements", "agent/kuberuntime.TestUnsafePodNamesCreateNothing"),
		na("metadata.resourceVersion", "the API server's concurrency token; status patches do not depend on it"),
		h("metadata.generation", "reported as status.observedGeneration (never lowered by a sync from an older copy) "+
			"and as the observedGeneration of every condition the agent sets; the resize conditions carry the "+
			"generation they were decided for (PodObservedGenerationTracking)", "agent/status.TestGenerateObservedGeneration"),
		h("metadata.creationTimestamp", "where the pod start latency metric counts from", "agent/metrics.TestPodStartTracker"),
		h("metadata.deletionTimestamp", "the pod is killed (preStop hooks, then the grace period); in a cluster the "+
			"agent deletes the object with grace 0 once its containers are gone",
			"agent/syncloop.TestRoutesUpdatesAndEvents", "agent.TestClusterPodsMirrorsAndNode", "agent/status.TestPodTerminatedDeletesAPIObject"),
		h("metadata.deletionGracePeriodSeconds", "the grace period of that kill, over spec.terminationGracePeriodSeconds",
			"agent/syncloop.TestRoutesUpdatesAndEvents", "agent.TestClusterPodsMirrorsAndNode"),
		h("metadata.labels", "copied to the sandbox's CRI labels beside the io.kubernetes.pod.* ones; read by "+
			"fieldRef metadata.labels; a `kubernetes.io/os` label naming another OS is rejected at admission "+
			"(PodOSSelectorNodeLabelDoesNotMatch)", sandboxProof, "agent/admission.TestOS", volumeProof),
		h("metadata.annotations", "copied to the sandbox's CRI annotations, where runtimes and CNI plugins read theirs; "+
			"read by fieldRef metadata.annotations", sandboxProof, volumeProof),
		na("metadata.ownerReferences[]", "the garbage collector's; the agent makes the Node the owner of the mirror pods it creates"),
		na("metadata.finalizers", "the API server keeps a deleted pod until they are gone; the agent's grace-0 delete "+
			"does not wait for them"),
		na("metadata.managedFields[]", "the API server's server-side apply bookkeeping"),

		h(annotationPrefix+"kubernetes.io/config.source]", "set by the agent on every pod it receives (file, http, "+
			"api); file and http mark a static pod: critical at admission and eviction, mirrored to the API server",
			"agent/podsource.TestManifestDirSource", "agent/podsource.TestManifestURLSource", "agent/podsource.TestAPISource"),
		h(annotationPrefix+"kubernetes.io/config.mirror]", "a mirror pod is never run: it shows a static pod in the "+
			"API server, which the agent creates with this annotation (the static pod's hash)",
			"agent.TestClusterPodsMirrorsAndNode"),
		na(annotationPrefix+"kubernetes.io/config.hash]", "written by the agent on a static pod (its content hash, "+
			"also its UID) and copied to its mirror pod as config.mirror; not a user's to set"),
		h(annotationPrefix+"container.apparmor.security.beta.kubernetes.io/<container>]", "read as the kubelet reads it when the fields are unset (runtime/default, localhost/<name>, unconfined): refused where the kernel does not enforce AppArmor, as the appArmorProfile fields", "agent/admission.TestAppArmorAdmit", "agent/kuberuntime.TestAppArmorProfileSent"),
		na(annotationPrefix+"{seccomp.security.alpha.kubernetes.io/pod|container.seccomp.security.alpha.kubernetes.io/<container>}]",
			"the kubelet stopped reading them in 1.27; the API server copies them into securityContext.seccompProfile"),
	}}
}
