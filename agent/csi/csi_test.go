package csi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestValidation(t *testing.T) {
	m := New(Config{Log: quiet()})
	for _, tc := range []struct {
		versions []string
		want     string
	}{
		{nil, `kubernetes.io/csi: RegisterPlugin for CSI driver "d" failed. Plugin returned an empty list for supported versions`},
		{[]string{"0.3.0", "2.0.0"}, `kubernetes.io/csi: RegisterPlugin for CSI driver "d" failed. None of the versions specified ["0.3.0" "2.0.0"] are supported.`},
	} {
		if err := m.ValidatePlugin("d", "/x.sock", tc.versions); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v", tc.versions, err)
		}
	}
	if err := m.ValidatePlugin("d", "/x.sock", []string{"1.0.0", "0.3.0"}); err != nil {
		t.Error(err)
	}
}

// A persistent CSI volume of the test driver: the driver recorded on the node at registration,
// the volume staged once for two pods, published for each (podInfoOnMount), unstaged with the last.
func TestStagePublishAndTearDown(t *testing.T) {
	no, yes := false, true
	f := newFixture(t, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &yes}})
	d, api, root := f.d, f.api, f.root
	m := f.manager(t, nil)
	ctx := context.Background()
	cn, err := api.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || len(cn.Spec.Drivers) != 1 || cn.Spec.Drivers[0].NodeID != d.NodeID || cn.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("CSINode %+v %v", cn, err)
	}
	node, _ := api.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if node.Annotations["csi.volume.kubernetes.io/nodeid"] != `{"csi.nodelet.test":"node-csi.nodelet.test"}` || node.Labels["topology.example.com/zone"] != "z1" {
		t.Fatalf("node %v %v", node.Annotations, node.Labels)
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: d.Name, VolumeHandle: "vol-1", FSType: "ext4"}}}}
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
	}
	pubA, err := m.SetUp(ctx, pod("a"), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI})
	if err != nil {
		t.Fatal(err)
	}
	pathA := pubA.Path
	if err := os.WriteFile(filepath.Join(pathA, "note"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The driver measures what it published (GET_VOLUME_STATS): the loop device's ext4.
	fs, err := m.VolumeStats(ctx, pathA)
	if err != nil || fs == nil || fs.CapacityBytes == nil || *fs.CapacityBytes == 0 || fs.InodesUsed == nil || *fs.InodesUsed == 0 {
		t.Fatalf("volume stats %+v %v", fs, err)
	}
	pubB, err := m.SetUp(ctx, pod("b"), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pathB := pubB.Path
	if b, err := os.ReadFile(filepath.Join(pathB, "note")); err != nil || string(b) != "kept" {
		t.Fatalf("the second pod reads %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(pathB, "other"), nil, 0o644); err == nil {
		t.Error("a read-only publish was written")
	}
	if err := m.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	info := func(uid string) string {
		return "csi.storage.k8s.io/ephemeral=false,csi.storage.k8s.io/pod.name=" + uid + ",csi.storage.k8s.io/pod.namespace=default," +
			"csi.storage.k8s.io/pod.uid=" + uid + ",csi.storage.k8s.io/serviceAccount.name="
	}
	want := []string{"stage vol-1", "publish vol-1 ro=false ctx=" + info("a"), "publish vol-1 ro=true ctx=" + info("b"),
		"unpublish vol-1", "unpublish vol-1", "unstage vol-1"}
	if got := d.Calls(); !slices.Equal(got, want) {
		t.Errorf("driver calls %q, want %q", got, want)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
	if ents, err := os.ReadDir(filepath.Join(root, "plugins", PluginName, d.Name)); err != nil || len(ents) != 0 {
		t.Errorf("the volume's global folder stays: %v %v", ents, err)
	}
	// The driver goes: the node forgets it.
	m.DeRegisterPlugin(d.Name, d.Endpoint)
	if cn, err := api.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil || len(cn.Spec.Drivers) != 0 {
		t.Errorf("CSINode after deregistration %+v %v", cn, err)
	}
}

func TestDriverNamesAreFolderNames(t *testing.T) {
	for _, name := range []string{"csi.example.com", "x0.driver-1"} {
		if err := validDriver(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b", "../x", "a\x00b"} {
		if validDriver(name) == nil {
			t.Errorf("%q accepted", name)
		}
	}
}

// An inline volume: refused for a driver whose CSIDriver does not list the Ephemeral mode;
// published without staging under the handle the kubelet derives from the pod and volume, with
// the volume's attributes and the pod's information; unpublished at the pod's teardown.
func TestInlineVolume(t *testing.T) {
	yes := true
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{PodInfoOnMount: &yes,
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}
	f := newFixture(t, drv)
	d, api, root := f.d, f.api, f.root
	m := f.manager(t, nil)
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-1"}}
	vol := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: d.Name,
		VolumeAttributes: map[string]string{"size": "16Mi"}}}}
	if _, err := m.SetUp(ctx, pod, Inline(pod, vol)); err == nil || !strings.Contains(err.Error(),
		`volume mode "Ephemeral" not supported by driver csi.nodelet.test (only supports ["Persistent"])`) {
		t.Fatalf("set up for a driver without the Ephemeral mode: %v", err)
	}
	drv.Spec.VolumeLifecycleModes = append(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
	if _, err := api.StorageV1().CSIDrivers().Update(ctx, drv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pub, err := m.SetUp(ctx, pod, Inline(pod, vol))
	path := pub.Path
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := loadVolData(filepath.Dir(path))
	handle := fmt.Sprintf("csi-%x", sha256.Sum256([]byte("pod-1scratch")))
	if err != nil || data.VolumeLifecycleMode != "Ephemeral" || data.VolumeHandle != handle || data.SpecVolID != "scratch" {
		t.Fatalf("vol_data.json %+v %v", data, err)
	}
	if got := m.VolumesInUse(); len(got) != 0 {
		t.Errorf("an inline volume listed in use: %v", got)
	}
	if err := m.TearDown(ctx, "pod-1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"publish " + handle + " ro=false ctx=csi.storage.k8s.io/ephemeral=true,csi.storage.k8s.io/pod.name=web," +
		"csi.storage.k8s.io/pod.namespace=default,csi.storage.k8s.io/pod.uid=pod-1,csi.storage.k8s.io/serviceAccount.name=,size=16Mi",
		"unpublish " + handle}
	if got := d.Calls(); !slices.Equal(got, want) {
		t.Errorf("driver calls %q, want %q", got, want)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
}

// A driver whose CSIDriver asks for service account tokens gets them in the volume context,
// as a JSON map by audience under the kubelet's key, and, with requiresRepublish, is published
// again at later syncs.
func TestTokensAndRepublish(t *testing.T) {
	yes := true
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{RequiresRepublish: &yes,
		TokenRequests:        []storagev1.TokenRequest{{Audience: "vault"}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}}
	f := newFixture(t, drv)
	d, root := f.d, f.root
	var audiences []string
	token := func(_ context.Context, pod *v1.Pod, audience string, _ *int64) (authenticationv1.TokenRequestStatus, error) {
		audiences = append(audiences, audience)
		return authenticationv1.TokenRequestStatus{Token: "tok-" + pod.Name, ExpirationTimestamp: metav1.NewTime(time.Unix(2000000000, 0).UTC())}, nil
	}
	m := f.manager(t, token)
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-1"}}
	vol := &v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: d.Name}}}
	pub, err := m.SetUp(ctx, pod, Inline(pod, vol))
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Republish || !slices.Equal(audiences, []string{"vault"}) {
		t.Fatalf("published %+v, tokens asked for %v", pub, audiences)
	}
	calls := d.Calls()
	want := `ctx=csi.storage.k8s.io/serviceAccount.tokens={"vault":{"token":"tok-web","expirationTimestamp":"2033-05-18T03:33:20Z"}}`
	if len(calls) != 1 || !strings.HasSuffix(calls[0], want) {
		t.Fatalf("driver calls %q, want one ending %s", calls, want)
	}
	if err := m.TearDown(ctx, "pod-1"); err != nil {
		t.Fatal(err)
	}

	// Without a token source the volume is refused, naming what failed.
	m2 := f.manager(t, nil)
	if _, err := m2.SetUp(ctx, pod, Inline(pod, vol)); err == nil || !strings.Contains(err.Error(), "service account tokens") {
		t.Fatalf("set up without tokens: %v", err)
	}
	if err := m2.TearDown(ctx, "pod-1"); err != nil {
		t.Fatal(err)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
}

// A PV of volumeMode Block: staged once, published for each pod as a file the driver puts the
// device on (at the kubelet's block paths), one device shared by both pods; the pods' marks
// let a restarted agent tear them down, and the last one unstages.
func TestBlockVolume(t *testing.T) {
	no := false
	f := newFixture(t, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}})
	d, root := f.d, f.root
	m := f.manager(t, nil)
	ctx := context.Background()
	block := v1.PersistentVolumeBlock
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-raw"}, Spec: v1.PersistentVolumeSpec{VolumeMode: &block,
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: d.Name, VolumeHandle: "raw-1"}}}}
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
	}
	paths := map[string]string{}
	for _, uid := range []string{"a", "b"} {
		pub, err := m.SetUp(ctx, pod(uid), Volume{Name: "raw", PV: pv, Source: pv.Spec.CSI})
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(root, "plugins", PluginName, "volumeDevices", "publish", "pv-raw", uid); pub.Path != want {
			t.Fatalf("published at %s, want %s", pub.Path, want)
		}
		if st, err := os.Stat(pub.Path); err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
			t.Fatalf("%s is not a block device: %v %v", pub.Path, st, err)
		}
		paths[uid] = pub.Path
	}
	dev, err := os.OpenFile(paths["a"], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dev.WriteAt([]byte("shared"), 0)
	dev.Sync()
	dev.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if dev, err := os.Open(paths["b"]); err != nil {
		t.Fatal(err)
	} else {
		dev.ReadAt(got, 0)
		dev.Close()
	}
	if string(got) != "shared" {
		t.Fatalf("pod b reads %q from the device pod a wrote", got)
	}

	// The driver measures the device (GET_VOLUME_STATS on the publish path): its size.
	if fs, err := m.VolumeStats(ctx, paths["b"]); err != nil || fs == nil || fs.CapacityBytes == nil || *fs.CapacityBytes != 64<<20 {
		t.Fatalf("block volume stats %+v %v", fs, err)
	}

	m = f.manager(t, nil) // restarted
	for _, uid := range []types.UID{"a", "b"} {
		if err := m.TearDown(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"stage raw-1", "publish raw-1 ro=false ctx=", "publish raw-1 ro=false ctx=", "unpublish raw-1", "unpublish raw-1", "unstage raw-1"}
	if got := d.Calls(); !slices.Equal(got, want) {
		t.Errorf("driver calls %q, want %q", got, want)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "plugins", PluginName, "volumeDevices", "publish")); len(ents) != 0 {
		t.Errorf("publish folders left: %v", ents)
	}
}

// A published volume grown on the node: the driver is asked, with the publish and staging
// paths, to grow it to the size the controller gave it (NodeExpandVolume).
func TestExpandVolume(t *testing.T) {
	no := false
	f := newFixture(t, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}})
	d := f.d
	m := f.manager(t, nil)
	ctx := context.Background()
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: d.Name, VolumeHandle: "grow-1", FSType: "ext4"}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "a"}}
	if _, err := m.SetUp(ctx, pod, Volume{Name: "data", PV: pv, Source: pv.Spec.CSI}); err != nil {
		t.Fatal(err)
	}
	if done, err := m.Expand(ctx, "a", "data", pv, 128<<20); err != nil || !done {
		t.Fatalf("expand: %v %v", done, err)
	}
	if calls := d.Calls(); !slices.Contains(calls, "expand grow-1 134217728 path=mount staged=true") {
		t.Fatalf("driver calls %q", calls)
	}
	if err := m.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
}
