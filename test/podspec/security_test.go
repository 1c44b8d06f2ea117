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
			"namespace's are refused (SysctlForbidden)", sandboxProof, "agent.TestAdmitChecksSysctls",
			"agent/internal/sysctl.TestAdmit"),
		h("{"+podSC+"|"+containerSC+"}.seccompProfile.type", "RuntimeDefault or Unconfined as the sandbox's and "+
			"containers' CRI seccomp profile (Unconfined when unset, as seccompDefault false)", sandboxProof, containerProof),
		ign("{"+podSC+"|"+containerSC+"}.seccompProfile.localhostProfile", "sent as given; the kubelet sends the profile's "+
			"path under <root-dir>/seccomp, so the runtime is asked for a file that is not there"),
		ign("{"+podSC+"|"+containerSC+"}.appArmorProfile", "the kubelet sends the profile (RuntimeDefault, Localhost, "+
			"Unconfined) in the CRI security context; the agent sends none and the runtime applies its default"),
		ign("{"+podSC+"|"+containerSC+"}.seLinuxOptions", "the kubelet sends the SELinux label (user, role, type, level) "+
			"in the CRI security context; the agent sends none"),
		ign(podSC+".seLinuxChangePolicy", "the kubelet mounts volumes with the pod's SELinux context (MountOption) or "+
			"relabels them (Recursive); the agent does neither"),
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
		ign(containerSC+".procMount", "Unmasked asks the runtime not to mask /proc (the kubelet sends no masked or "+
			"read-only paths); the agent masks it always"),
	}}
}
