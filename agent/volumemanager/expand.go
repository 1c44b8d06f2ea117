package volumemanager

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expandClaim grows a published CSI claim on the node once the controller has grown its volume,
// as the kubelet's node expander does at each sync: when the claim's resize status asks the node
// (NodeResizePending, or NodeResizeInProgress left by an agent that stopped) and its PV is larger
// than the claim's capacity, the claim is marked in progress, the driver expands the volume
// (NodeExpandVolume, when it expands on the node), and the claim's status gets the new capacity,
// its resize status and conditions cleared; a failure sets NodeResizeError, records
// FileSystemResizeFailed and is tried again at the next sync, the pod going on meanwhile.
func (m *Manager) expandClaim(ctx context.Context, pod *v1.Pod, volume, claim string) error {
	if m.Claims == nil || m.CSI == nil || claim == "" {
		return nil
	}
	claims := m.Claims.PersistentVolumeClaims(pod.Namespace)
	pvc, err := claims.Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil // the claim's own checks happened at set up; a read failing now waits for the next sync
	}
	status := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	if status != v1.PersistentVolumeClaimNodeResizePending && status != v1.PersistentVolumeClaimNodeResizeInProgress {
		return nil
	}
	pv, err := m.Claims.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	want, have := pv.Spec.Capacity[v1.ResourceStorage], pvc.Status.Capacity[v1.ResourceStorage]
	if want.Cmp(have) <= 0 || (pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock) {
		return nil // raw block volumes are not grown on this node
	}
	if status == v1.PersistentVolumeClaimNodeResizePending {
		if err := patchClaimStatus(ctx, claims, claim, map[string]any{
			"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): v1.PersistentVolumeClaimNodeResizeInProgress}}); err != nil {
			return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
		}
	}
	if _, err := m.CSI.Expand(ctx, pod.UID, volume, pv, want.Value()); err != nil {
		conds := withoutResizeConditions(pvc.Status.Conditions)
		conds = append(conds, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Message: err.Error()})
		patchClaimStatus(ctx, claims, claim, map[string]any{"conditions": conds})
		// The volume stays as it was, usable: the pod goes on, and the next sync tries again.
		m.event(pod, v1.EventTypeWarning, "FileSystemResizeFailed", fmt.Sprintf("MountVolume.NodeExpandVolume failed for volume %q : %v", volume, err))
		return nil
	}
	if err := patchClaimStatus(ctx, claims, claim, map[string]any{
		"capacity":                  map[string]any{string(v1.ResourceStorage): want.String()},
		"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): nil},
		"conditions":                withoutResizeConditions(pvc.Status.Conditions)}); err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion finished: %w", err)
	}
	m.event(pod, v1.EventTypeNormal, "FileSystemResizeSuccessful", fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q", volume))
	return nil
}

// withoutResizeConditions are the claim's conditions less those an expansion on the node ends.
func withoutResizeConditions(in []v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	out := []v1.PersistentVolumeClaimCondition{}
	for _, c := range in {
		if c.Type != v1.PersistentVolumeClaimFileSystemResizePending && c.Type != v1.PersistentVolumeClaimNodeResizeError {
			out = append(out, c)
		}
	}
	return out
}

type claimStatusPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.PersistentVolumeClaim, error)
}

func patchClaimStatus(ctx context.Context, claims claimStatusPatcher, name string, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = claims.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	return err
}

func (m *Manager) event(pod *v1.Pod, typ, reason, msg string) {
	if m.Recorder != nil {
		m.Recorder.Eventf(pod, typ, reason, "%s", msg)
	}
}
