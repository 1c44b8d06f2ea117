package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// checkpointName is the file in a pod's folder that holds its range, as the kubelet names it:
// pods/<uid>/userns. Its JSON is the kubelet's too, so either reads the other's.
const checkpointName = "userns"

// maxCheckpointBytes bounds the read: the file the agent writes is about 130 bytes.
const maxCheckpointBytes = 4 << 10

// podDirMode is the pod folder's mode when the checkpoint is the first thing in it; the volume
// manager makes it the same way.
const podDirMode = 0o750

type checkpoint struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

func rangeCheckpoint(first, length uint32) checkpoint {
	m := []idMapping{{HostID: first, ContainerID: 0, Length: length}}
	return checkpoint{UIDMappings: m, GIDMappings: m}
}

// checkpointPath is <root>/pods/<uid>/userns; a UID that is not one path element is refused.
func checkpointPath(root string, uid types.UID) (string, error) {
	dir, err := podpath.PodDir(root, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, checkpointName), nil
}

// readCheckpoint returns the pod's recorded range; found is false when the pod has none. Only a
// regular file of at most maxCheckpointBytes is read.
func readCheckpoint(root string, uid types.UID) (first, length uint32, found bool, err error) {
	p, err := checkpointPath(root, uid)
	if err != nil {
		return 0, 0, false, err
	}
	b, err := regularfile.Read(p, maxCheckpointBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	first, length, err = parseCheckpoint(b)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", p, err)
	}
	return first, length, true, nil
}

// parseCheckpoint accepts only what the agent (or the kubelet) writes: one mapping, the same for
// uids and gids, starting at container ID 0.
func parseCheckpoint(b []byte) (first, length uint32, err error) {
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, 0, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	if len(c.UIDMappings) != 1 || len(c.GIDMappings) != 1 {
		return 0, 0, errors.New("invalid user namespace mappings file: want exactly one uid and one gid mapping")
	}
	if c.UIDMappings[0] != c.GIDMappings[0] {
		return 0, 0, errors.New("invalid user namespace mappings file: the uid and gid mappings differ")
	}
	m := c.UIDMappings[0]
	if m.ContainerID != 0 {
		return 0, 0, errors.New("invalid user namespace mappings file: container ID 0 is not mapped")
	}
	return m.HostID, m.Length, nil
}

// writeCheckpoint records the pod's range atomically (a crash leaves the old file or the new,
// and the rename is synced), making the pod's folder if the volume manager has not yet.
func writeCheckpoint(root string, uid types.UID, first, length uint32) error {
	p, err := checkpointPath(root, uid)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), podDirMode); err != nil {
		return err
	}
	b, err := json.Marshal(rangeCheckpoint(first, length))
	if err != nil {
		return err
	}
	return atomicfile.Write(p, b, 0o600)
}

func removeCheckpoint(root string, uid types.UID) error {
	p, err := checkpointPath(root, uid)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
