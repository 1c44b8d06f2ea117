package podspec

const (
	podSC       = "spec.securityContext"
	containerSC = anyContainer + ".securityContext"
)

func securityArea() area {
	return area{title: "Security", intro: "A container's securityContext field wins over the pod's of the same name.", rows: []row{
		h(podSC+".runAsUser", "the sandbox's and every container's user", sandboxProof, containerProof),
		h(podSC+".runAsGroup", "the sandbox's and every container's primary group", sandboxProof, containerProof),
		h(podSC+".runAsNonRoot", "a container that would run as root (runAsUser 0, or the image's user root or "+
			"not numeric) does not start: CreateContainerConfigError \"container has runAsNonRoot and image will run "+
			"as root (pod: ..., container: ...)\"", "agent/kuberuntime.TestRunAsNonRoot", "agent/kuberuntime.TestRunAsNonRootOnTheRealRuntime"),
		h(podSC+".supplementalGroups", "added to every container's groups", sandboxProof, containerProof),
		h(podSC+".supplementalGroupsPolicy", "sent as the CRI SupplementalGroupsPolicy of the sandbox and every "+
			"container: Merge (default) keeps the groups the image's /etc/group gives the user, Strict only the pod's; "+
			"the runtime's report of the user (uid, gid, groups) is status.containerStatuses[].user.linux. Strict on a "+
			"runtime whose Status does not claim the feature: CreateContainerConfigError \"SupplementalGroupsPolicy=Strict "+
			"is not supported in this node\" (the kubelet's admission message)",
			"agent/kuberuntime.TestSupplementalGroupsPolicyOnTheRealRuntime", "test/podspec.TestStrictSupplementalGroupsNeedsTheRuntime",
			"agent/status.TestGenerateReportsContainerUser"),
		h(podSC+".fsGroup", "added to every container's groups; emptyDir and API volumes (secret, configMap, downwardAPI, "+
			"projected) are owned by it, group-writable", containerProof, "agent/volumemanager.TestWriteAtomicFSGroup",
			"test/podspec.TestFSGroupOwnsEmptyDir"),
		h(podSC+".fsGroupChangePolicy", "as the kubelet: it hands the policy only to persistent volumes' plugins (CSI, "+
			"local, iSCSI, FC, FlexVolume), which nodelet refuses; emptyDir and API volumes take the fsGroup whatever the "+
			"policy says (OnRootMismatch included)", "test/podspec.TestFSGroupOwnsEmptyDir", "agent/volumemanager.TestWriteAtomicFSGroup"),
		h(podSC+".sysctls[].{name|value}", "set in the sandbox; unsafe ones must be in allowedUnsafeSysctls and a node "+
			"namespace's are refused (SysctlForbidden)", sandboxProof, "agent/admission.TestChainChecksSysctls",
			"agent/internal/sysctl.TestAdmit"),
		h("{"+podSC+"|"+containerSC+"}.seccompProfile.type", "RuntimeDefault, Localhost or Unconfined as the containers' CRI seccomp profile, the container's over the pod's; unset means Unconfined, or RuntimeDefault with seccompDefault", sandboxProof, containerProof, "agent/kuberuntime.TestSeccompProfileSent", "agent/agentconfig.TestSeccompDefault"),
		h("{"+podSC+"|"+containerSC+"}.seccompProfile.localhostProfile", "the profile file <root-dir>/seccomp/<name> (a clean relative path; `..` and absolute paths refused as the API server refuses them), loaded by the runtime as a regular file of at most 1 MiB; a missing file fails the container with CreateContainerError \"cannot load seccomp profile ...\"; the sandbox itself runs RuntimeDefault as with the kubelet", "agent/kuberuntime.TestSeccompProfileSent", "agent/kuberuntime.TestSeccompLocalhostReachesTheRuntime", "agent/kuberuntime.TestSeccompLocalhostOnTheRealRuntime", "agent/kuberuntime.TestSeccompLocalhostOutsideTheProfileDirIsRefused", "agent/podvalidation.TestValidateStaticPodSecurityProfiles", "runtime/oci.TestLocalhostSeccompReadSafely"),
		h("{"+podSC+"|"+containerSC+"}.appArmorProfile.{type|localhostProfile}", "where the kernel enforces AppArmor, sent to the runtime as the CRI profile (RuntimeDefault, Localhost: loaded profiles only, Unconfined), the container's over the pod's; where it does not (as here), a pod asking for anything but Unconfined is refused: status Failed, reason AppArmor, \"Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host\"", "agent/admission.TestAppArmorAdmit", "agent.TestAppArmorLocalhostPod", "agent/kuberuntime.TestAppArmorProfileSent", "runtime/oci.TestAppArmorWhereTheKernelHasNone", "runtime/oci.TestAppArmorWhereTheKernelEnforcesIt"),
		h("{"+podSC+"|"+containerSC+"}.seLinuxOptions.{user|role|type|level}", "sent as the CRI SELinux label (the container's options replace the pod's); the runtime labels the process and its mounts where SELinux is enabled and, as containerd, ignores the label where it is not (here); a malformed level is refused either way", "agent/kuberuntime.TestSELinuxOptionsSent", "runtime/oci.TestSELinuxWhereTheKernelRunsIt", "runtime/oci.TestSELinuxWhereTheKernelHasNone"),
		na(podSC+".seLinuxChangePolicy", "how volumes are relabelled on an SELinux host (Recursive or MountOption); the values are validated, but nodelet relabels no volume: on a host without SELinux the kubelet does nothing with it either, and nodelet does not support SELinux-enforcing hosts for pods with volumes (README, Security profiles)"),
		na("{"+podSC+"|"+containerSC+"}.windowsOptions", "Windows nodes only; a Linux kubelet ignores them too (the API server "+
			"refuses them when spec.os.name is linux)"),

		h(containerSC+".runAsUser", "the container's user", containerProof),
		h(containerSC+".runAsGroup", "the container's primary group", containerProof),
		h(containerSC+".runAsNonRoot", "as the pod's, for this container", "agent/kuberuntime.TestRunAsNonRoot"),
		h(containerSC+".privileged", "a privileged container (all capabilities and devices, nothing masked); the sandbox "+
			"is privileged when an app container is", containerProof, sandboxProof),
		h(containerSC+".allowPrivilegeEscalation", "false sets no_new_privs", containerProof),
		h(containerSC+".readOnlyRootFilesystem", "a read-only root filesystem", containerProof),
		h(containerSC+".capabilities.{add|drop}", "added to and dropped from the runtime's default set", containerProof),
		h(containerSC+".procMount", "Unmasked sends no masked or read-only paths and the runtime leaves /proc unmasked; allowed only with hostUsers: false, as the API server validates (\"`hostUsers` must be false to use `Unmasked`\")", "agent/kuberuntime.TestProcMountPathsSent", "runtime/oci.TestProcMountUnmasked", "agent/podvalidation.TestValidateStaticPodSecurityProfiles"),
	}}
}
