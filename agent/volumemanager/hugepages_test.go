package volumemanager

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func hugePagesPod(uid string, requests v1.ResourceList, media ...v1.StorageMedium) *v1.Pod {
	var vols []v1.Volume
	for i, m := range media {
		vols = append(vols, v1.Volume{Name: "hp" + string(rune('a'+i)), VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: m}}})
	}
	pod := testPod(uid, vols...)
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: requests, Limits: requests}}}
	return pod
}

// HugePages media are hugetlbfs mounts of the pod's huge page size, made once, gone at teardown;
// fsGroup owns them as any emptyDir.
func TestEmptyDirHugePages(t *testing.T) {
	testutil.Require(t)
	if _, err := os.Stat("/sys/kernel/mm/hugepages/hugepages-2048kB"); err != nil {
		t.Fatalf("the kernel offers no 2 MiB huge pages (hugetlbfs): %v", err)
	}
	m := &Manager{RootDir: t.TempDir()}
	two := v1.ResourceList{"hugepages-2Mi": resource.MustParse("4Mi"), v1.ResourceMemory: resource.MustParse("16Mi")}
	pod := hugePagesPod("uid-hugepages", two, v1.StorageMediumHugePages, "HugePages-2Mi")
	gid := int64(4321)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	for range 2 { // idempotent: one mount each, not two
		if err := m.SetUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hpa", "hpb"} {
		dir := emptyDir(t, m, pod, name)
		if mps := testutil.MountsUnder(dir); len(mps) != 1 {
			t.Fatalf("mounts at %s: %v", dir, mps)
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil || fs.Type != unix.HUGETLBFS_MAGIC || fs.Bsize != 2<<20 {
			t.Fatalf("%s: statfs type %#x block size %d, %v; want hugetlbfs of 2 MiB pages", name, fs.Type, fs.Bsize, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil || st.Gid != uint32(gid) || st.Mode&unix.S_ISGID == 0 {
			t.Fatalf("%s: group %d mode %o, %v", name, st.Gid, st.Mode, err)
		}
	}
	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(m.RootDir); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if _, err := os.Stat(podDir(t, m, pod)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pod dir kept: %v", err)
	}
}

// What the kubelet refuses, with its messages; nothing is mounted.
func TestEmptyDirHugePagesErrors(t *testing.T) {
	testutil.Require(t)
	mixed := v1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi"), "hugepages-1Gi": resource.MustParse("1Gi")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"no request", hugePagesPod("uid-hp-none", nil, v1.StorageMediumHugePages),
			"medium HugePages: hugePages storage requested, but there is no resource request for huge pages"},
		{"no request of that size", hugePagesPod("uid-hp-other", v1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")}, "HugePages-1Gi"),
			"medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages"},
		{"several sizes", hugePagesPod("uid-hp-mixed", mixed, v1.StorageMediumHugePages),
			"medium: HugePages can't be used if container requests multiple huge page sizes"},
		{"a size the kernel lacks", hugePagesPod("uid-hp-3m", v1.ResourceList{"hugepages-3Mi": resource.MustParse("3Mi")}, "HugePages-3Mi"),
			"hugetlbfs: invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{RootDir: t.TempDir()}
			t.Cleanup(func() { m.TearDown(tc.pod.UID) })
			err := m.SetUp(context.Background(), tc.pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("setup: %v, want %q", err, tc.want)
			}
			if mps := testutil.MountsUnder(m.RootDir); len(mps) > 0 {
				t.Fatalf("mounted: %v", mps)
			}
		})
	}
}
