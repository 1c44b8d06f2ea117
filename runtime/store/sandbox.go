package store

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// Sandbox is the persisted record of a pod sandbox: what RunPodSandbox was asked and what it made.
// Containers read their namespaces, cgroup parent and pod files from it.
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
	// PIDNSPath is the pod's shared PID namespace (held by catatonit, InfraPID) when the pod
	// shares one; empty otherwise.
	PIDNSPath string `json:"pidnsPath,omitempty"`
	InfraPID  int    `json:"infraPid,omitempty"`
	// ShmPath is the pod's /dev/shm, a tmpfs shared by its containers; empty with host IPC.
	ShmPath      string   `json:"shmPath,omitempty"`
	CgroupParent string   `json:"cgroupParent"`
	IPs          []string `json:"ips,omitempty"`
	// NetworkReady records that CNI ADD succeeded, so DEL runs exactly once per ADD.
	NetworkReady bool `json:"networkReady,omitempty"`
}
