// Package checkpoint is the device manager's checkpoint file, kubelet_internal_checkpoint, in the
// kubelet's format: a kubelet started on this root directory after nodelet (or the other way
// round) reads the allocations and the registered resources the other left.
//
// The types carry the kubelet's package and type names on purpose: the checksum is FNV-32a over a
// dump that prints them, so a file only verifies on both sides when they print the same.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/dump"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// FileName is the checkpoint's name in the device plugin folder, as the kubelet names it.
const FileName = "kubelet_internal_checkpoint"

// maxSize bounds the read: a node's allocations are a few kilobytes; the file is root's, but a
// corrupted one must not take the agent's memory.
const maxSize = 16 << 20

// DevicesPerNUMA are the device IDs of one allocation by NUMA node; -1 holds the devices a plugin
// gave no topology.
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource and the plugin's Allocate response
// for them (protobuf bytes of a ContainerAllocateResponse).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

type file struct {
	Data     checkpointData
	Checksum uint64
}

// sum is the kubelet's checksum of the data (checksum.New(cp.Data)).
func sum(d checkpointData) uint64 {
	h := fnv.New32a()
	h.Write([]byte(dump.ForHash(d)))
	return uint64(h.Sum32())
}

// ErrNotFound is a folder without a checkpoint: a first start, or a node whose root directory
// was wiped.
var ErrNotFound = errors.New("checkpoint is not found")

// Read returns the entries and the registered devices (resource → device IDs) of the checkpoint
// in dir. A file whose checksum does not match is refused, as the kubelet refuses it.
func Read(dir string) ([]PodDevicesEntry, map[string][]string, error) {
	path := filepath.Join(dir, FileName)
	b, err := regularfile.Read(path, maxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if got := sum(f.Data); got != f.Checksum {
		return nil, nil, fmt.Errorf("read %s: checkpoint is corrupted: checksum %d, content sums to %d", path, f.Checksum, got)
	}
	return f.Data.PodDeviceEntries, f.Data.RegisteredDevices, nil
}

// Write replaces the checkpoint in dir so that a crash leaves the old file or the new one.
func Write(dir string, entries []PodDevicesEntry, registered map[string][]string) error {
	if entries == nil {
		entries = []PodDevicesEntry{}
	}
	if registered == nil {
		registered = map[string][]string{}
	}
	f := file{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
	f.Checksum = sum(f.Data)
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, FileName), b, 0o644)
}
