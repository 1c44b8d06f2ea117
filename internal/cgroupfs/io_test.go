package cgroupfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestIOOnBothVersions(t *testing.T) {
	want := []IOStat{{Major: 8, Minor: 0, ReadBytes: 4096, WriteBytes: 8192, Reads: 1, Writes: 2}, {Major: 253, Minor: 0, ReadBytes: 10, WriteBytes: 20, Reads: 3, Writes: 4}}
	v2 := t.TempDir()
	os.MkdirAll(filepath.Join(v2, "pod"), 0o755)
	os.WriteFile(filepath.Join(v2, "pod", "io.stat"), []byte("253:0 rbytes=10 wbytes=20 rios=3 wios=4 dbytes=0 dios=0\n8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n"), 0o644)
	got, err := FS{Mount: v2, Version: V2}.IO("/pod")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("v2: %+v %v", got, err)
	}

	v1 := t.TempDir()
	dir := filepath.Join(v1, "blkio", "pod")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "blkio.throttle.io_service_bytes_recursive"), []byte("8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 0\n8:0 Total 12288\n253:0 Read 10\n253:0 Write 20\nTotal 12318\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "blkio.throttle.io_serviced_recursive"), []byte("8:0 Read 1\n8:0 Write 2\n253:0 Read 3\n253:0 Write 4\nTotal 10\n"), 0o644)
	got, err = FS{Mount: v1, Version: V1}.IO("/pod")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("v1: %+v %v", got, err)
	}
	if _, err := (FS{Mount: v1, Version: V1}).IO("/gone"); err == nil {
		t.Error("a cgroup without blkio files read")
	}
}

func TestProcs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "pod"), 0o755)
	os.WriteFile(filepath.Join(root, "pod", "cgroup.procs"), []byte("12\n34\n"), 0o644)
	if got, err := (FS{Mount: root, Version: V2}).Procs("/pod"); err != nil || !reflect.DeepEqual(got, []int{12, 34}) {
		t.Errorf("procs %v %v", got, err)
	}
}
