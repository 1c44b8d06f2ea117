package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The files below were written by the kubelet v1.34.4 (its checkpoint package's MarshalCheckpoint).
const (
	kubeletEmpty = `{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":2932075448}`
	kubeletFull  = `{"Data":{"PodDeviceEntries":[{"PodUID":"pod-1","ContainerName":"c1","ResourceName":"example.com/resource","DeviceIDs":{"-1":["Dev-1"]},"AllocResp":"EgwKCi90bXA="},{"PodUID":"pod-2","ContainerName":"c2","ResourceName":"example.com/resource","DeviceIDs":{"0":["Dev-2","Dev-3"],"1":["Dev-4"]},"AllocResp":null}],"RegisteredDevices":{"example.com/other":[],"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":2074186538}`
)

var fullEntries = []PodDevicesEntry{
	{PodUID: "pod-1", ContainerName: "c1", ResourceName: "example.com/resource", DeviceIDs: DevicesPerNUMA{-1: {"Dev-1"}},
		AllocResp: []byte{0x12, 0x0c, 0x0a, 0x0a, 0x2f, 0x74, 0x6d, 0x70}},
	{PodUID: "pod-2", ContainerName: "c2", ResourceName: "example.com/resource", DeviceIDs: DevicesPerNUMA{0: {"Dev-2", "Dev-3"}, 1: {"Dev-4"}}},
}
var fullRegistered = map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}, "example.com/other": {}}

func TestWritesTheKubeletsFile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		entries    []PodDevicesEntry
		registered map[string][]string
		want       string
	}{
		{"empty", nil, nil, kubeletEmpty},
		{"full", fullEntries, fullRegistered, kubeletFull},
	} {
		dir := t.TempDir()
		if err := Write(dir, tc.entries, tc.registered); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: wrote\n%s\nthe kubelet writes\n%s", tc.name, b, tc.want)
		}
	}
}

func TestReadsTheKubeletsFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(kubeletFull), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, registered, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(entries, fullEntries) || !reflect.DeepEqual(registered, fullRegistered) {
		t.Errorf("read %+v %v", entries, registered)
	}
}

func TestRefusesCorruptedOrMissingOrNotRegular(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Read(dir); err != ErrNotFound {
		t.Errorf("no file: %v, want ErrNotFound", err)
	}
	bad := strings.Replace(kubeletFull, "Dev-4", "Dev-5", 1)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "checkpoint is corrupted") {
		t.Errorf("edited file: %v", err)
	}
	os.Remove(filepath.Join(dir, FileName))
	if err := os.Mkdir(filepath.Join(dir, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir); err == nil {
		t.Error("a folder in the checkpoint's place was read")
	}
}
