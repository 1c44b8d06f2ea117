package store

import (
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is the persisted record of a pod sandbox: what RunPodSandbox was asked and what it made.
// Containers read their namespaces, cgroup parent and pod files from it.
//
// A *Sandbox held by the registry is an immutable snapshot: the sandbox RPCs change a sandbox by
// storing a modified Clone, so readers never need a lock and never see a half-made change.
type Sandbox struct {
	ID        string                       `json:"id"`
	Name      string                       `json:"name"` // unique: name_namespace_uid_attempt
	Config    *runtimeapi.PodSandboxConfig `json:"config"`
	State     runtimeapi.PodSandboxState   `json:"state"`
	CreatedAt int64                        `json:"createdAt"` // unix nanoseconds
	Handler   string                       `json:"handler"`   // resolved runtime handler name

	// Dir holds the pod's generated files (hostname, resolv.conf, hosts), under the runtime's root.
	Dir string `json:"dir"`
	// Pinned namespaces (bind mounts under the state dir); empty when the pod uses the host's.
	NetNSPath string `json:"netnsPath,omitempty"`
	IPCNSPath string `json:"ipcnsPath,omitempty"`
	UTSNSPath string `json:"utsnsPath,omitempty"`
	// UserNSPath is the pod's own user namespace (userns_options mode POD), which owns its
	// net, ipc, uts and shared PID namespaces; empty when the pod uses the host's.
	UserNSPath string `json:"usernsPath,omitempty"`
	// PIDNSPath is the pod's shared PID namespace (held by catatonit, InfraPID) when the pod
	// shares one; empty otherwise.
	PIDNSPath string `json:"pidnsPath,omitempty"`
	// InfraPID is the pod's init on the host: catatonit holding PIDNSPath, or the gVisor
	// sandbox's process when Gvisor is set.
	InfraPID int `json:"infraPid,omitempty"`
	// Gvisor marks a pod that is one gVisor sandbox: its root container, whose runsc ID is the
	// sandbox's ID, holds every container of the pod.
	Gvisor bool `json:"gvisor,omitempty"`
	// ShmPath is the pod's /dev/shm, a tmpfs shared by its containers; empty with host IPC.
	ShmPath      string   `json:"shmPath,omitempty"`
	CgroupParent string   `json:"cgroupParent"`
	IPs          []string `json:"ips,omitempty"`
	// NetworkReady records that CNI ADD succeeded (the pod has IPs).
	NetworkReady bool `json:"networkReady,omitempty"`
	// NetworkSetUp records that CNI ADD was called and no DEL has succeeded since: DEL runs
	// once for each ADD, after a failed ADD too, and after a daemon restart.
	NetworkSetUp bool `json:"networkSetUp,omitempty"`

	// Creating marks a record written before RunPodSandbox acted. Every path of a sandbox follows
	// from its ID, so recovery can undo whatever such a half-made sandbox got.
	Creating bool `json:"creating,omitempty"`
	// InfraStartTime is InfraPID's start time (field 22 of /proc/<pid>/stat), so that a
	// recycled pid is never taken for the pod's init.
	InfraStartTime uint64 `json:"infraStartTime,omitempty"`
	// CgroupCreated lists the cgroup dirs (cgroupfs paths, parents first) that did not exist
	// before this sandbox: Remove deletes them, and leaves alone a parent the kubelet made.
	CgroupCreated []string `json:"cgroupCreated,omitempty"`
}

// Clone returns a copy that can be changed without touching sb. Config is shared: it is never
// changed after RunPodSandbox.
func (sb *Sandbox) Clone() *Sandbox {
	c := *sb
	c.IPs = slices.Clone(sb.IPs)
	c.CgroupCreated = slices.Clone(sb.CgroupCreated)
	return &c
}
