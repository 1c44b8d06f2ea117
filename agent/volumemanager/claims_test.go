package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/csi"
	"github.com/nodelet/nodelet/test/harness/kubefake"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func claim(name, volume string, phase v1.PersistentVolumeClaimPhase) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: v1.PersistentVolumeClaimStatus{Phase: phase}}
}

func pv(name, claimUID string, src v1.PersistentVolumeSource) *v1.PersistentVolume {
	p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src}}
	if claimUID != "" {
		p.Spec.ClaimRef = &v1.ObjectReference{UID: types.UID(claimUID)}
	}
	return p
}

func claimPod(claimName string, readOnly bool) *v1.Pod {
	pod := testPod("uid-claim-"+claimName, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimName, ReadOnly: readOnly}}})
	pod.Namespace = "ns"
	return pod
}

// TestClaimsResolveToTheirPV: a bound claim's hostPath or local PV is where the volume is; every
// way a claim cannot be used fails the mount with the kubelet's words.
func TestClaimsResolveToTheirPV(t *testing.T) {
	host, local := t.TempDir(), t.TempDir()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	dying := claim("dying", "pv-host", v1.ClaimBound)
	dying.DeletionTimestamp = &metav1.Time{}
	block := v1.PersistentVolumeBlock
	blockPV := pv("pv-block", "uid-block", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: local}})
	blockPV.Spec.VolumeMode = &block
	client := kubefake.New(
		claim("host", "pv-host", v1.ClaimBound), pv("pv-host", "uid-host", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}),
		claim("local", "pv-local", v1.ClaimBound), pv("pv-local", "uid-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: local}}),
		claim("pending", "", v1.ClaimPending), dying,
		claim("stolen", "pv-other", v1.ClaimBound), pv("pv-other", "uid-someone-else", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}),
		claim("unbound-pv", "pv-free", v1.ClaimBound), pv("pv-free", "", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}),
		claim("nfs", "pv-nfs", v1.ClaimBound), pv("pv-nfs", "uid-nfs", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}),
		claim("block", "pv-block", v1.ClaimBound), blockPV,
		claim("localfile", "pv-file", v1.ClaimBound), pv("pv-file", "uid-localfile", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: file}}),
	)
	m := &Manager{RootDir: t.TempDir(), Claims: client}
	for _, tc := range []struct {
		claim    string
		readOnly bool
		path     string
		err      string
	}{
		{claim: "host", path: host},
		{claim: "local", readOnly: true, path: local},
		{claim: "missing", err: `error processing PVC ns/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found`},
		{claim: "pending", err: "error processing PVC ns/pending: PVC is not bound"},
		{claim: "dying", err: "error processing PVC ns/dying: PVC is being deleted"},
		{claim: "stolen", err: "error processing PVC ns/stolen: found PV object pv-other but its pv.Spec.ClaimRef.UID uid-someone-else does not point to claim.UID uid-stolen"},
		{claim: "unbound-pv", err: "error processing PVC ns/unbound-pv: found PV object pv-free but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"},
		{claim: "nfs", err: "PV pv-nfs: only hostPath, local and CSI PersistentVolumes are supported on this node"},
		{claim: "block", err: "PV pv-block: local path: " + local + " is not a block device"},
		{claim: "localfile", err: "is neither a folder nor a block device"},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			pod := claimPod(tc.claim, tc.readOnly)
			err := m.Prepare(context.Background(), pod)
			path, readOnly, ok := m.ClaimPath(pod, "data")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || ok {
					t.Fatalf("Prepare: %v (path %q %v), want %q", err, path, ok, tc.err)
				}
				return
			}
			if err != nil || !ok || path != tc.path || readOnly != tc.readOnly {
				t.Fatalf("Prepare: %v; ClaimPath %q %v %v, want %q %v", err, path, readOnly, ok, tc.path, tc.readOnly)
			}
			m.Forget(pod.UID)
			if _, _, ok := m.ClaimPath(pod, "data"); ok {
				t.Error("a forgotten pod's claim is still resolved")
			}
		})
	}
	standalone := &Manager{RootDir: t.TempDir()}
	if err := standalone.Prepare(context.Background(), claimPod("host", false)); !errors.Is(err, ErrClaim) {
		t.Errorf("standalone Prepare of a claim: %v", err)
	}
}

// TestLocalClaimTakesTheFSGroup: a writable local PV is given to the pod's fsGroup, every file of
// it, symlinks not followed; OnRootMismatch leaves a tree whose root is already so; a read-only
// claim is left alone.
func TestLocalClaimTakesTheFSGroup(t *testing.T) {
	testutil.Require(t)
	local := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, nil, 0o600)
	os.MkdirAll(filepath.Join(local, "d"), 0o700)
	os.WriteFile(filepath.Join(local, "d", "f"), nil, 0o600)
	os.Symlink(outside, filepath.Join(local, "link"))
	client := kubefake.New(claim("local", "pv-local", v1.ClaimBound),
		pv("pv-local", "uid-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: local}}))
	m := &Manager{RootDir: t.TempDir(), Claims: client}
	gid := int64(4321)
	gidOf := func(p string) (uint32, os.FileMode) {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Gid, st.Mode()
	}

	ro := claimPod("local", true)
	ro.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	if err := m.Prepare(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	if g, _ := gidOf(filepath.Join(local, "d", "f")); g == uint32(gid) {
		t.Fatal("a read-only claim's files were given to the fsGroup")
	}

	pod := claimPod("local", false)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{local, filepath.Join(local, "d"), filepath.Join(local, "d", "f"), filepath.Join(local, "link")} {
		if g, _ := gidOf(p); g != uint32(gid) {
			t.Errorf("%s: group %d, want %d", p, g, gid)
		}
	}
	if _, mode := gidOf(filepath.Join(local, "d")); mode&(os.ModeSetgid|0o070) != os.ModeSetgid|0o070 {
		t.Errorf("folder mode %v", mode)
	}
	if _, mode := gidOf(filepath.Join(local, "d", "f")); mode.Perm() != 0o660 {
		t.Errorf("file mode %v", mode)
	}
	if g, _ := gidOf(outside); g == uint32(gid) {
		t.Error("a symlink was followed")
	}

	// OnRootMismatch: the root is already the fsGroup's, so a new file is left as it is.
	os.WriteFile(filepath.Join(local, "new"), nil, 0o600)
	onRoot := v1.FSGroupChangeOnRootMismatch
	pod.Spec.SecurityContext.FSGroupChangePolicy = &onRoot
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// (Its group is the fsGroup already: the setgid folder gives it; its mode tells.)
	if _, mode := gidOf(filepath.Join(local, "new")); mode.Perm() != 0o600 {
		t.Errorf("OnRootMismatch walked a tree whose root was already the fsGroup's: new file %v", mode)
	}
	pod.Spec.SecurityContext.FSGroupChangePolicy = nil
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, mode := gidOf(filepath.Join(local, "new")); mode.Perm() != 0o660 {
		t.Errorf("Always left a file as it was: %v", mode)
	}
}

// TestEphemeralVolumeUsesThePodsOwnClaim: a generic ephemeral volume is the claim named after the
// pod and the volume, used only once the pod owns it (a claim of that name made by someone else is
// refused, as the kubelet refuses it).
func TestEphemeralVolumeUsesThePodsOwnClaim(t *testing.T) {
	host := t.TempDir()
	pod := testPod("uid-eph", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pod.Namespace, pod.Name = "ns", "web"
	owned := claim("web-scratch", "pv-eph", v1.ClaimBound)
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: &yes}}
	client := kubefake.New(owned, pv("pv-eph", string(owned.UID), v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}))
	m := &Manager{RootDir: t.TempDir(), Claims: client}
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if p, ro, ok := m.ClaimPath(pod, "scratch"); !ok || p != host || ro {
		t.Fatalf("ClaimPath %q %v %v", p, ro, ok)
	}

	stranger := claim("other-scratch", "pv-eph", v1.ClaimBound)
	client2 := kubefake.New(stranger, pv("pv-eph", string(stranger.UID), v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}))
	other := testPod("uid-other", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	other.Namespace, other.Name = "ns", "other"
	m2 := &Manager{RootDir: t.TempDir(), Claims: client2}
	err := m2.Prepare(context.Background(), other)
	if want := "PVC ns/other-scratch was not created for pod ns/other (pod is not owner)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Prepare with a claim the pod does not own: %v, want %q", err, want)
	}
}

// fakeCSI publishes every volume at a folder of its own and counts the set-ups and teardowns.
type fakeCSI struct {
	dir       string
	setUps    int
	tornDown  []types.UID
	ownership bool
	readOnly  bool
	ephemeral bool
	republish bool
	expanded  []int64
	expandErr error
}

func (f *fakeCSI) SetUp(_ context.Context, pod *v1.Pod, vol csi.Volume) (csi.Published, error) {
	f.setUps++
	f.readOnly, f.ephemeral = vol.ReadOnly, vol.Ephemeral
	p := filepath.Join(f.dir, string(pod.UID), vol.Name)
	return csi.Published{Path: p, Ownership: f.ownership, Republish: f.republish}, os.MkdirAll(p, 0o755)
}

func (f *fakeCSI) TearDown(_ context.Context, uid types.UID) error {
	f.tornDown = append(f.tornDown, uid)
	return nil
}

func (f *fakeCSI) Expand(_ context.Context, uid types.UID, volume string, pv *v1.PersistentVolume, size int64) (bool, error) {
	f.expanded = append(f.expanded, size)
	return true, f.expandErr
}

func (f *fakeCSI) VolumeStats(_ context.Context, published string) (*statsapi.FsStats, error) {
	return statfs(published), nil
}

// A claim of a CSI PV is published once per pod (later syncs leave it be), given to the pod's
// fsGroup when the driver leaves that to the node, and released when the pod's volumes go.
func TestCSIClaimsArePublishedOnceAndReleased(t *testing.T) {
	client := kubefake.New(claim("db", "pv-csi", v1.ClaimBound), pv("pv-csi", "uid-db", v1.PersistentVolumeSource{
		CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h", ReadOnly: true}}))
	f := &fakeCSI{dir: t.TempDir(), ownership: true}
	m := &Manager{RootDir: t.TempDir(), Claims: client, CSI: f}
	pod := claimPod("db", false)
	gid := int64(4321)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	for range 2 {
		if err := m.Prepare(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	path, readOnly, ok := m.ClaimPath(pod, "data")
	if f.setUps != 1 || !ok || path != filepath.Join(f.dir, string(pod.UID), "data") || !readOnly || !f.readOnly {
		t.Fatalf("set-ups %d, path %q %v %v (driver told read-only %v)", f.setUps, path, readOnly, ok, f.readOnly)
	}
	if st, err := os.Stat(path); err != nil || st.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
		t.Errorf("the volume's group: %v %v", st, err)
	}
	if err := m.TearDownVolumes(pod.UID); err != nil {
		t.Fatal(err)
	}
	if len(f.tornDown) != 1 || f.tornDown[0] != pod.UID {
		t.Errorf("torn down %v", f.tornDown)
	}
}

// An inline CSI volume is published once per pod as an ephemeral volume, bound like a claimed
// one, measured in the pod's summary without a claim and left out of the claims' series.
func TestInlineCSIVolume(t *testing.T) {
	f := &fakeCSI{dir: t.TempDir()}
	m := &Manager{RootDir: t.TempDir(), CSI: f}
	ro := true
	pod := testPod("uid-inline", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", ReadOnly: &ro}}})
	for range 2 {
		if err := m.Prepare(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	path, readOnly, ok := m.ClaimPath(pod, "scratch")
	if f.setUps != 1 || !f.ephemeral || !ok || path != filepath.Join(f.dir, "uid-inline", "scratch") || !readOnly {
		t.Fatalf("set-ups %d (ephemeral %v), path %q %v %v", f.setUps, f.ephemeral, path, readOnly, ok)
	}
	if st := m.PodClaimStats(context.Background(), pod.UID); len(st) != 1 || st[0].Name != "scratch" || st[0].PVCRef != nil || st[0].CapacityBytes == nil {
		t.Errorf("pod volume stats %+v", st)
	}
	if c := m.ClaimStats(); len(c) != 0 {
		t.Errorf("an inline volume in the claims' series: %+v", c)
	}
	if err := m.TearDownVolumes(pod.UID); err != nil {
		t.Fatal(err)
	}
	if len(f.tornDown) != 1 {
		t.Errorf("torn down %v", f.tornDown)
	}
	standalone := &Manager{RootDir: t.TempDir()}
	if err := standalone.Prepare(context.Background(), pod); !errors.Is(err, ErrClaim) {
		t.Errorf("an inline CSI volume without CSI: %v", err)
	}
}

// A CSI volume whose driver asks for requiresRepublish is published again at every sync.
func TestRepublishedCSIVolume(t *testing.T) {
	f := &fakeCSI{dir: t.TempDir(), republish: true}
	m := &Manager{RootDir: t.TempDir(), CSI: f}
	pod := testPod("uid-re", v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}})
	for range 3 {
		if err := m.Prepare(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	if f.setUps != 3 {
		t.Fatalf("published %d times in three syncs, want 3", f.setUps)
	}
}

// TestBlockClaims: a local PV of volumeMode Block is its device node, for the containers that
// name it in volumeDevices, measured as the kubelet measures a block device (its size, no
// usage); a claim used against its volumeMode fails with the kubelet's words.
func TestBlockClaims(t *testing.T) {
	testutil.Require(t)
	dev := testutil.LoopDevice(t, 8<<20)
	block := v1.PersistentVolumeBlock
	blockPV := func(name, claimUID string, src v1.PersistentVolumeSource) *v1.PersistentVolume {
		p := pv(name, claimUID, src)
		p.Spec.VolumeMode = &block
		return p
	}
	client := kubefake.New(
		claim("dev", "pv-dev", v1.ClaimBound), blockPV("pv-dev", "uid-dev", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}}),
		claim("dir", "pv-dir", v1.ClaimBound), pv("pv-dir", "uid-dir", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: t.TempDir()}}),
		claim("hostblock", "pv-hb", v1.ClaimBound), blockPV("pv-hb", "uid-hostblock", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dev}}),
	)
	m := &Manager{RootDir: t.TempDir(), Claims: client}
	for _, tc := range []struct {
		claim, err string
		mounted    bool // the container names it in volumeMounts, else in volumeDevices
	}{
		{claim: "dev"},
		{claim: "dev", mounted: true, err: "volume data has volumeMode Block, but is specified in volumeMounts"},
		{claim: "dir", err: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		{claim: "hostblock", err: "PV pv-hb has volumeMode Block: only local and CSI PVs are mapped as raw block devices on this node"},
	} {
		t.Run(fmt.Sprint(tc.claim, tc.mounted), func(t *testing.T) {
			pod := claimPod(tc.claim, false)
			c := v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}
			if tc.mounted {
				c = v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}
			}
			pod.Spec.Containers = []v1.Container{c}
			err := m.Prepare(context.Background(), pod)
			path, _, ok := m.ClaimPath(pod, "data")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || ok {
					t.Fatalf("Prepare: %v (path %q %v), want %q", err, path, ok, tc.err)
				}
				return
			}
			if err != nil || !ok || path != dev {
				t.Fatalf("Prepare: %v; ClaimPath %q %v, want %s", err, path, ok, dev)
			}
			claims := m.ClaimStats()
			if len(claims) != 1 || *claims[0].FS.CapacityBytes != 8<<20 || *claims[0].FS.UsedBytes != 0 || *claims[0].FS.AvailableBytes != 0 {
				t.Errorf("the block device measured %+v, want its size only", claims)
			}
			m.Forget(pod.UID)
		})
	}
}
