package store

import (
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container is the persisted record of a container: what CreateContainer was asked, what it made,
// and (in Status) what has happened to it since. The immutable part is set once at create; Status
// changes under the record's lock and is persisted after each change.
type Container struct {
	ID        string                      `json:"id"`
	Name      string                      `json:"name"` // unique: name_sandboxname_attempt
	SandboxID string                      `json:"sandboxId"`
	Config    *runtimeapi.ContainerConfig `json:"config"`
	CreatedAt int64                       `json:"createdAt"` // unix nanoseconds
	Handler   string                      `json:"handler"`   // the sandbox's resolved runtime handler

	// Image is what the request named; ImageID and ImageRef what it resolved to.
	Image    string `json:"image"`
	ImageID  string `json:"imageId"`
	ImageRef string `json:"imageRef"`

	Bundle string `json:"bundle"` // the OCI bundle dir (config.json, conmon's sockets)
	Rootfs string `json:"rootfs"` // the rootfs the provider made
	// UpperDir is the rootfs's writable layer; "" in records written before it was kept, and for
	// providers that do not say.
	UpperDir string `json:"upperDir,omitempty"`
	// ImageVolumes are the provider's rootfs IDs made for the request's image mounts.
	ImageVolumes []string `json:"imageVolumes,omitempty"`
	LogPath      string   `json:"logPath"`    // absolute; "" when the pod has no log directory
	CgroupPath   string   `json:"cgroupPath"` // the OCI linux.cgroupsPath
	StopSignal   string   `json:"stopSignal"` // from the image config, "" for SIGTERM
	// User is the identity the process runs as, resolved against the image at create.
	User *runtimeapi.ContainerUser `json:"user,omitempty"`

	// Creating marks a record written before CreateContainer made the container and returned
	// its ID: no client knows it, so recovery undoes whatever such a record names.
	Creating bool `json:"creating,omitempty"`

	Status ContainerStatus `json:"status"`

	mu sync.Mutex
}

// ContainerStatus is the mutable part of a container record.
type ContainerStatus struct {
	State      runtimeapi.ContainerState `json:"state"`
	Pid        int                       `json:"pid,omitempty"`
	ConmonPid  int                       `json:"conmonPid,omitempty"`
	StartedAt  int64                     `json:"startedAt,omitempty"`
	FinishedAt int64                     `json:"finishedAt,omitempty"`
	ExitCode   int32                     `json:"exitCode"`
	Reason     string                    `json:"reason,omitempty"`
	Message    string                    `json:"message,omitempty"`
	// Resources are the limits in force: the create request's, then UpdateContainerResources'.
	Resources *runtimeapi.LinuxContainerResources `json:"resources,omitempty"`
	// Transient states keep concurrent calls apart; they are not trusted after a restart.
	Starting bool `json:"-"`
	Removing bool `json:"-"`
}

// Lock guards Status.
func (c *Container) Lock() { c.mu.Lock() }

// Unlock releases Lock.
func (c *Container) Unlock() { c.mu.Unlock() }

// Snapshot returns a copy of Status taken under the lock.
func (c *Container) Snapshot() ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Status
}
