package csi

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/kubefake"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// A volume the attach/detach controller attaches is in the node's volumesInUse from before its
// attachment is waited for until its last pod's teardown, also across an agent restart.
func TestVolumesInUse(t *testing.T) {
	f := newFixture(t)
	d, api, root := f.d, f.api, f.root
	m := f.manager(t, nil)
	ctx := context.Background()
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: d.Name, VolumeHandle: "vol-1", FSType: "ext4"}}}}
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
	}
	want := []v1.UniqueVolumeName{"kubernetes.io/csi/csi.nodelet.test^vol-1"}

	if _, err := m.SetUp(ctx, pod("a"), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI}); err == nil {
		t.Fatal("set up before the volume was attached")
	}
	if got := m.VolumesInUse(); !slices.Equal(got, want) {
		t.Fatalf("in use while waiting for the attachment: %v, want %v", got, want)
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: attachmentName("vol-1", d.Name, "n1")},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	if _, err := api.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a", "b"} {
		if _, err := m.SetUp(ctx, pod(uid), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI}); err != nil {
			t.Fatal(err)
		}
	}

	// A restarted agent finds the published volume before any pod is synced again.
	m = f.manager(t, nil)
	if got := m.VolumesInUse(); !slices.Equal(got, want) {
		t.Fatalf("in use after a restart: %v, want %v", got, want)
	}
	if err := m.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := m.VolumesInUse(); !slices.Equal(got, want) {
		t.Fatalf("in use while pod b publishes it: %v, want %v", got, want)
	}
	if err := m.TearDown(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := m.VolumesInUse(); len(got) != 0 {
		t.Fatalf("in use after the last teardown: %v", got)
	}

	// A driver that does not attach lists nothing.
	no := false
	if _, err := api.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: d.Name},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetUp(ctx, pod("c"), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI}); err != nil {
		t.Fatal(err)
	}
	if got := m.VolumesInUse(); len(got) != 0 {
		t.Fatalf("in use for a driver that does not attach: %v", got)
	}
	if err := m.TearDown(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
}

// The node's CSINode is made once its Node exists, before any driver registers; one found is
// left alone.
func TestCSINodeAtStart(t *testing.T) {
	api := fake.NewSimpleClientset()
	m := New(Config{NodeName: "n1", RootDir: t.TempDir(), Client: kubefake.Wrap(api), Log: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	if _, err := api.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-done
	cn, err := api.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || len(cn.Spec.Drivers) != 0 || len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("CSINode %+v %v", cn, err)
	}
	api.ClearActions()
	m.Run(ctx)
	for _, a := range api.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a CSINode found was changed: %v", a)
		}
	}
}
