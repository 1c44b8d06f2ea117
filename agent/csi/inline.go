package csi

import (
	"crypto/sha256"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Inline is the pod's inline CSI volume (spec.volumes[].csi) as the kubelet's CSI plugin sees
// it: a volume of its own per pod and volume name (handle csi-<sha256(pod UID + name)>), read-write
// once, its publish secret from the pod's namespace, published (never staged nor attached) for
// the pod alone and unpublished at its teardown.
func Inline(pod *v1.Pod, vol *v1.Volume) Volume {
	in := vol.CSI
	src := &v1.CSIPersistentVolumeSource{Driver: in.Driver, VolumeHandle: inlineHandle(string(pod.UID), vol.Name),
		VolumeAttributes: in.VolumeAttributes}
	if in.FSType != nil {
		src.FSType = *in.FSType
	}
	if in.NodePublishSecretRef != nil {
		src.NodePublishSecretRef = &v1.SecretReference{Name: in.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: vol.Name}, Spec: v1.PersistentVolumeSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, PersistentVolumeSource: v1.PersistentVolumeSource{CSI: src}}}
	return Volume{Name: vol.Name, PV: pv, Source: src, ReadOnly: in.ReadOnly != nil && *in.ReadOnly, Ephemeral: true}
}

func inlineHandle(podUID, volume string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volume)))
}

// supportsEphemeral: a driver serves inline volumes only when its CSIDriver object lists the
// Ephemeral lifecycle mode, as the kubelet requires.
func supportsEphemeral(drv *storagev1.CSIDriver, name string) error {
	if drv == nil {
		return fmt.Errorf("volume mode %q not supported by driver %s (no CSIDriver object)", storagev1.VolumeLifecycleEphemeral, name)
	}
	if !slices.Contains(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral) {
		return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", storagev1.VolumeLifecycleEphemeral, name, drv.Spec.VolumeLifecycleModes)
	}
	return nil
}
