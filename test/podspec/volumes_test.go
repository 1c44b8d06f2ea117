package podspec

const (
	vol = "spec.volumes[]"
	// keyed are the sources whose files are keys of a secret or config map.
	keyed = vol + ".{secret|configMap|projected.sources[].secret|projected.sources[].configMap}"
	// downward are the sources whose files are fields of the pod.
	downward = vol + ".{downwardAPI|projected.sources[].downwardAPI}"

	unsupportedVolume = "a container mounting it does not start: CreateContainerConfigError \"volume \\\"<name>\\\": " +
		"unsupported volume type (emptyDir, hostPath, persistentVolumeClaim, ephemeral, csi, image, secret, configMap, downwardAPI and projected are)\"; " +
		"a volume no container mounts is not set up"
)

func volumesArea() area {
	return area{title: "Volumes", intro: "Volumes live under `<root-dir>/pods/<uid>/volumes/` in folders closed to other " +
		"users of the host; secret, configMap, downwardAPI and projected volumes on their own tmpfs in the kubelet's atomic " +
		"`..data` layout, refreshed in place while the pod runs. Standalone, secrets and config maps come from the " +
		"manifest folder.", rows: []row{
		h(vol+".name", "the volume's folder and what volumeMounts name; one path element only",
			"agent/volumemanager.TestVolumesInRealContainers", "agent/volumemanager.TestClimbingNamesAreRefused"),

		h(vol+".emptyDir.medium", "\"\": a folder on the node's disk; Memory: a tmpfs; HugePages and HugePages-<size>: a "+
			"hugetlbfs (pagesize= the size named, or the one size the containers request), as the kubelet's; no huge page "+
			"request of that size, or several sizes for HugePages, fail the mount (FailedMount) with the kubelet's messages",
			"agent/volumemanager.TestEmptyDirMemoryAndTearDown", "agent/volumemanager.TestVolumesInRealContainers",
			"agent/volumemanager.TestEmptyDirHugePages", "agent/volumemanager.TestEmptyDirHugePagesErrors"),
		h(vol+".emptyDir.sizeLimit", "the tmpfs's size (Memory); on disk, a pod using more is evicted",
			"agent/volumemanager.TestVolumesInRealContainers", "agent/eviction.TestStorageOverLimit"),
		h(vol+".hostPath.path", "the node's path, bind-mounted", "agent/volumemanager.TestVolumesInRealContainers",
			"agent/integration.TestPodFeaturesOnNodeletRuntime"),
		h(vol+".hostPath.type", "checked before the containers start (DirectoryOrCreate and FileOrCreate create); "+
			"a mismatch is a FailedMount event", "agent/volumemanager.TestCheckHostPath", "agent/volumemanager.TestPrepareFailureIsAnEvent"),

		h(vol+".{secret.secretName|configMap.name|projected.sources[].secret.name|projected.sources[].configMap.name}",
			"the object in the pod's namespace (the API server's, or standalone the manifest folder's) whose keys become files",
			"agent/volumemanager.TestPrepareWritesAPIVolumes", "agent/integration.TestWorkloadOnNodeletRuntime",
			"agent/volumemanager.TestDirObjects"),
		h(keyed+".items[].{key|path}", "only these keys, at these paths inside the volume (a missing key fails the mount)",
			"agent/volumemanager.TestPrepareWritesAPIVolumes", "agent/volumemanager.TestPrepareErrors", volumeProof),
		h(keyed+".items[].mode", "that file's mode", volumeProof),
		h(keyed+".optional", "a missing object leaves the volume (or its part) empty instead of failing the mount",
			"agent/volumemanager.TestPrepareWritesAPIVolumes", volumeProof),
		h(vol+".{secret|configMap|downwardAPI|projected}.defaultMode", "the files' mode when an item sets none (default 0644)",
			"agent/integration.TestWorkloadOnNodeletRuntime", volumeProof),
		h(downward+".items[].path", "the file's path inside the volume", "agent/volumemanager.TestPrepareWritesAPIVolumes"),
		h(downward+".items[].fieldRef.fieldPath", "metadata.name, namespace, uid; labels and annotations as key=\"value\" "+
			"lines; one label or annotation by ['key'] as its bare value (empty when unset), as the kubelet writes them",
			"agent/volumemanager.TestPrepareWritesAPIVolumes", "agent/volumemanager.TestDownwardSubscriptedFields",
			"agent/integration.TestWorkloadOnNodeletRuntime", volumeProof),
		na(downward+".items[].fieldRef.apiVersion", "the API version of fieldPath; only v1 is valid, which the API server "+
			"(and static pod validation) checks"),
		h(downward+".items[].resourceFieldRef.{containerName|resource|divisor}", "a container's limit or request, divided "+
			"and rounded up; an unset limit shows the node's allocatable", "agent/volumemanager.TestDownwardVolumeFilesUseAllocatable",
			"agent/integration.TestWorkloadOnNodeletRuntime"),
		h(downward+".items[].mode", "that file's mode", volumeProof),
		h(vol+".projected.sources[].serviceAccountToken.path", "a token of the pod's service account, requested "+
			"(TokenRequest, bound to the pod) and refreshed at 80% of its life; needs the API server",
			"agent/volumemanager.TestPrepareWritesAPIVolumes"),
		h(vol+".projected.sources[].serviceAccountToken.{audience|expirationSeconds}", "the token's audience and "+
			"lifetime (default 3607 s)", volumeProof),
		ref(vol+".projected.sources[].{clusterTrustBundle|podCertificate}", "the pod's volumes are not made and its "+
			"containers do not start: event FailedMount \"MountVolume.SetUp failed: volume \\\"<name>\\\": unsupported "+
			"projection (clusterTrustBundle and podCertificate are not supported)\"", refusalProof),

		h(vol+".image.reference", "the image is pulled (the pod's pull secrets) before the containers mounting it start, and the "+
			"runtime mounts it read-only (CRI Mount.image); subPath and subPathExpr name a folder of it; a failed pull leaves "+
			"the container waiting (ErrImagePull, ImagePullBackOff) with the kubelet's events; its image counts as in use for "+
			"image GC", "agent/kuberuntime.TestImageVolumeMounted", "agent/kuberuntime.TestImageVolumeSubPath",
			"agent/kuberuntime.TestImageVolumeOnTheRealRuntime", "agent/kuberuntime.TestImageVolumePullFailures", "agent/images.TestImageGCKeepsImageVolumes"),
		h(vol+".image.pullPolicy", "Always, IfNotPresent, Never (default Always for :latest or no tag), when a container "+
			"mounting the volume starts", "agent/kuberuntime.TestImageVolumePullPolicies"),
		h(vol+".persistentVolumeClaim.claimName", "the claim in the pod's namespace, resolved to the PersistentVolume it is "+
			"bound to as the kubelet does, with its messages: a claim missing, not bound or being deleted, or a PV bound to "+
			"another claim, fails the mount (FailedMount \"MountVolume.SetUp failed: volume \\\"<name>\\\": error processing "+
			"PVC <namespace>/<claim>: PVC is not bound\"). hostPath and local PVs are bound into the containers (a writable "+
			"local PV is given to the pod's fsGroup as the kubelet's local plugin does, fsGroupChangePolicy honoured; a local "+
			"PV whose path is a block device is its filesystem, made when the device has none (fsType, ext4 by default) and "+
			"mounted once per node at the kubelet's plugins/kubernetes.io/local-volume/mounts/<pv> until no pod claims it); a CSI PV "+
			"of a driver registered on the node is staged (once per node, when the driver stages) and published for the pod "+
			"at the kubelet's paths, with the CSIDriver's attachRequired (the VolumeAttachment waited for), podInfoOnMount, "+
			"fsGroupPolicy, tokenRequests (the pod's service account tokens in the volume context, as the kubelet passes "+
			"them) and requiresRepublish (published again at each sync) honoured, grown on the node (NodeExpandVolume) "+
			"once the controller has grown it and the claim's status finished as the kubelet finishes it, and unpublished and unstaged when the pod is gone; a local or CSI PV of volumeMode "+
			"Block is the device of the containers naming it in volumeDevices; a PV of any other kind, or a hostPath PV "+
			"of volumeMode Block, fails the mount naming the PV; the attachable ones are listed in the Node's volumesInUse until torn down",
			"agent/volumemanager.TestClaimsResolveToTheirPV", "agent/volumemanager.TestBlockClaims", "agent/csi.TestVolumesInUse",
			"agent/volumemanager.TestLocalDeviceFilesystem",
			"agent/volumemanager.TestExpandClaim", "agent/csi.TestExpandVolume", "agent/volumemanager.TestLocalClaimTakesTheFSGroup",
			"agent/kuberuntime.TestClaimVolumeMount", "agent/csi.TestStagePublishAndTearDown",
			"agent/volumemanager.TestCSIClaimsArePublishedOnceAndReleased", "agent/integration.TestClusterCSIOnNodeletRuntime"),
		h(vol+".persistentVolumeClaim.readOnly", "the PV is mounted read-only in every container",
			"agent/volumemanager.TestClaimsResolveToTheirPV", "agent/kuberuntime.TestClaimVolumeMount"),
		h(vol+".ephemeral", "the claim the ephemeral volume controller makes for the pod (<pod>-<volume>), waited for "+
			"until bound and refused unless the pod owns it (\"PVC <namespace>/<claim> was not created for pod "+
			"<namespace>/<pod> (pod is not owner)\", the kubelet's words), then used as a persistentVolumeClaim",
			"agent/volumemanager.TestEphemeralVolumeUsesThePodsOwnClaim", "agent/kuberuntime.TestClaimVolumeMount"),
		na(vol+".ephemeral.volumeClaimTemplate", "the ephemeral volume controller makes the claim from it; the node reads "+
			"only the claim"),
		h(vol+".csi.{driver|volumeAttributes|fsType|readOnly|nodePublishSecretRef.name}", "an inline (ephemeral) volume of a "+
			"CSI driver registered on the node whose CSIDriver lists the Ephemeral lifecycle mode (else FailedMount \"volume "+
			"mode \\\"Ephemeral\\\" not supported by driver <driver> ...\"), as the kubelet's CSI plugin: its own handle "+
			"csi-<sha256(pod UID + volume name)>, published (never staged nor attached) at the kubelet's path with the "+
			"volume's attributes, fsType, read-only flag and publish secret (from the pod's namespace), podInfoOnMount with "+
			"csi.storage.k8s.io/ephemeral=true, service account tokens and republishing as the CSIDriver asks, fsGroup as "+
			"its fsGroupPolicy says; unpublished at the pod's teardown",
			"agent/csi.TestInlineVolume", "agent/volumemanager.TestInlineCSIVolume", "agent/csi.TestTokensAndRepublish",
			"agent/volumemanager.TestRepublishedCSIVolume", "agent/volumemanager.TestTokenStatusForCSIDrivers"),
		ref(vol+".{nfs|iscsi|fc|rbd|cephfs|glusterfs|flexVolume|cinder|"+
			"azureFile|azureDisk|awsElasticBlockStore|gcePersistentDisk|vsphereVolume|photonPersistentDisk|portworxVolume|"+
			"scaleIO|storageos|quobyte|flocker|gitRepo}", unsupportedVolume, refusalProof, "agent/kuberuntime.TestGenerateConfigs"),
	}}
}
