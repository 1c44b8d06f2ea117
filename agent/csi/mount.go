package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// volData is the kubelet's vol_data.json: what teardown and a restarted agent need of a volume.
type volData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

const volDataFile = "vol_data.json"

// Volume is a pod's CSI persistent volume, as its PV and claim give it.
type Volume struct {
	Name   string // the pod's volume name
	PV     *v1.PersistentVolume
	Source *v1.CSIPersistentVolumeSource
	// ReadOnly: the pod's claim or the PV says so.
	ReadOnly bool
	// Ephemeral: an inline volume of the pod (Inline makes it), published without staging or
	// attaching, its lifecycle the pod's.
	Ephemeral bool
}

// validDriver: a driver name becomes a folder name; the apiserver allows only DNS names, and a
// vol_data.json read back is checked the same way.
func validDriver(name string) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("CSI driver name %q", name)
	}
	return nil
}

// globalDir is the volume's folder of the node: its staging path is globalmount below it.
func (m *Manager) globalDir(driverName, handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(m.cfg.RootDir, "plugins", PluginName, driverName, fmt.Sprintf("%x", sum), "")
}

// targetDir is the pod's folder of the volume: its publish path is mount below it.
func (m *Manager) targetDir(uid, volume string) (string, error) {
	dir, err := podpath.VolumesDir(m.cfg.RootDir, types.UID(uid))
	if err != nil {
		return "", err
	}
	if volume == "" || volume != filepath.Base(volume) || volume == "." || volume == ".." {
		return "", fmt.Errorf("volume name %q", volume)
	}
	return filepath.Join(dir, "kubernetes.io~csi", volume), nil
}

// attachmentName is the VolumeAttachment the attach/detach controller makes for the volume on
// this node, named as the kubelet names it.
func attachmentName(handle, driverName, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driverName+node)))
}

// Published is a volume set up for a pod.
type Published struct {
	// Path is the host path containers bind.
	Path string
	// Ownership: the node gives the volume to the pod's fsGroup (the driver does not).
	Ownership bool
	// Republish: the driver's CSIDriver asks for NodePublishVolume again at each of the pod's
	// syncs (requiresRepublish), to renew what it mounted (service account tokens).
	Republish bool
}

// SetUp stages the volume on the node (once, when the driver stages) and publishes it for the
// pod, returning the host path containers bind. fsGroup is the pod's, passed to drivers that
// apply it themselves (VOLUME_MOUNT_GROUP); the caller applies it otherwise, when ownership says.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod, vol Volume) (Published, error) {
	src := vol.Source
	if src.Driver == "" || src.VolumeHandle == "" {
		return Published{}, errors.New(logf("mounter.SetUpAt failed: the PV %s names no driver or volume handle", vol.PV.Name))
	}
	if err := validDriver(src.Driver); err != nil {
		return Published{}, err
	}
	c, err := m.client(src.Driver)
	if err != nil {
		return Published{}, errors.New(logf("mounter.SetUpAt failed to get CSI client: %v", err))
	}
	defer c.close()
	drv, err := m.csiDriver(ctx, src.Driver)
	if err != nil {
		return Published{}, err
	}
	mode := storagev1.VolumeLifecyclePersistent
	var publishContext map[string]string
	if vol.Ephemeral {
		mode = storagev1.VolumeLifecycleEphemeral
		if err := supportsEphemeral(drv, src.Driver); err != nil {
			return Published{}, err
		}
	} else {
		// Listed in use before the attachment is waited for, so the attach/detach controller
		// never detaches what this pod may be about to publish.
		m.markInUse(pod.UID, uniqueName(src.Driver, src.VolumeHandle), attaches(drv))
		if publishContext, err = m.publishContext(ctx, drv, src); err != nil {
			return Published{}, err
		}
	}
	caps, err := c.capabilities(ctx)
	stage, mountGroup := caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME], caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP]
	if err != nil {
		return Published{}, errors.New(logf("mounter.SetUpAt failed to check for STAGE_UNSTAGE_VOLUME capability: %v", err))
	}
	if vol.PV.Spec.VolumeMode != nil && *vol.PV.Spec.VolumeMode == v1.PersistentVolumeBlock {
		if vol.Ephemeral {
			return Published{}, fmt.Errorf("inline volume %s: CSI inline volumes are filesystems", vol.Name)
		}
		return m.publishBlock(ctx, c, pod, vol, drv, publishContext, stage)
	}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: src.FSType, MountFlags: vol.PV.Spec.MountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(vol.PV.Spec.AccessModes)},
	}
	var group *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		group = sc.FSGroup
	}
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil {
		policy = *drv.Spec.FSGroupPolicy
	}
	mountGroupArg := ""
	if mountGroup && group != nil && policy != storagev1.NoneFSGroupPolicy {
		mountGroupArg = fmt.Sprint(*group)
		capability.GetMount().VolumeMountGroup = mountGroupArg
	}
	dir, err := m.targetDir(string(pod.UID), vol.Name)
	if err != nil {
		return Published{}, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Published{}, errors.New(logf("mounter.SetUpAt failed to create dir %q: %v", dir, err))
	}
	// Written before the stage, so that the pod's teardown also undoes a stage that was cut
	// short (the pod deleted meanwhile) but that the driver went on with.
	data := volData{SpecVolID: vol.PV.Name, VolumeHandle: src.VolumeHandle, DriverName: src.Driver, NodeName: m.cfg.NodeName,
		AttachmentID: attachmentName(src.VolumeHandle, src.Driver, m.cfg.NodeName), VolumeLifecycleMode: string(mode)}
	if err := saveVolData(dir, data); err != nil {
		return Published{}, err
	}
	staging := ""
	if stage && !vol.Ephemeral {
		global := m.globalDir(src.Driver, src.VolumeHandle)
		staging = filepath.Join(global, "globalmount")
		if err := m.stage(ctx, c, src, capability, publishContext, global, staging); err != nil {
			return Published{}, err
		}
	}
	attrs, secrets, err := m.publishInputs(ctx, pod, vol, drv)
	if err != nil {
		return Published{}, err
	}
	target := filepath.Join(dir, "mount")
	pctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.node.NodePublishVolume(pctx, &csipb.NodePublishVolumeRequest{VolumeId: src.VolumeHandle, PublishContext: publishContext,
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, Readonly: vol.ReadOnly,
		Secrets: secrets, VolumeContext: attrs}); err != nil {
		return Published{}, errors.New(logf("mounter.SetUpAt failed: rpc error: %v", err))
	}
	// The kubelet applies fsGroup when the driver does not: File always, ReadWriteOnceWithFSType
	// for a volume with an fsType that only one node writes.
	ownership := group != nil && mountGroupArg == "" && !vol.ReadOnly && (policy == storagev1.FileFSGroupPolicy ||
		(policy == storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy && src.FSType != "" && onlyRWO(vol.PV.Spec.AccessModes)))
	return Published{Path: target, Ownership: ownership, Republish: republishes(drv)}, nil
}

func republishes(drv *storagev1.CSIDriver) bool {
	return drv != nil && drv.Spec.RequiresRepublish != nil && *drv.Spec.RequiresRepublish
}

// publishInputs are NodePublishVolume's volume context and secrets: the volume's attributes,
// the pod's information and service account tokens when the CSIDriver asks for them, and the
// publish secret.
func (m *Manager) publishInputs(ctx context.Context, pod *v1.Pod, vol Volume, drv *storagev1.CSIDriver) (attrs, secrets map[string]string, err error) {
	attrs = vol.Source.VolumeAttributes
	if drv != nil && drv.Spec.PodInfoOnMount != nil && *drv.Spec.PodInfoOnMount {
		attrs = merged(attrs, map[string]string{"csi.storage.k8s.io/pod.name": pod.Name, "csi.storage.k8s.io/pod.namespace": pod.Namespace,
			"csi.storage.k8s.io/pod.uid": string(pod.UID), "csi.storage.k8s.io/serviceAccount.name": pod.Spec.ServiceAccountName,
			"csi.storage.k8s.io/ephemeral": fmt.Sprint(vol.Ephemeral)})
	}
	if drv != nil && len(drv.Spec.TokenRequests) > 0 {
		tokens, err := m.podTokens(ctx, pod, drv.Spec.TokenRequests)
		if err != nil {
			return nil, nil, err
		}
		attrs = merged(attrs, tokens)
	}
	secrets, err = m.secrets(ctx, vol.Source.NodePublishSecretRef)
	return attrs, secrets, err
}

// stage makes the volume ready on the node, once: the staging path's vol_data.json says it was.
func (m *Manager) stage(ctx context.Context, c *client, src *v1.CSIPersistentVolumeSource, capability *csipb.VolumeCapability,
	publishContext map[string]string, global, staging string) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return errors.New(logf("attacher.MountDevice failed to create dir %q: %v", staging, err))
	}
	if err := saveVolData(global, volData{VolumeHandle: src.VolumeHandle, DriverName: src.Driver}); err != nil {
		return err
	}
	secrets, err := m.secrets(ctx, src.NodeStageSecretRef)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// NodeStageVolume is idempotent: a volume staged already is answered at once.
	if _, err := c.node.NodeStageVolume(sctx, &csipb.NodeStageVolumeRequest{VolumeId: src.VolumeHandle, PublishContext: publishContext,
		StagingTargetPath: staging, VolumeCapability: capability, Secrets: secrets, VolumeContext: src.VolumeAttributes}); err != nil {
		return errors.New(logf("attacher.MountDevice failed: rpc error: %v", err))
	}
	return nil
}

func saveVolData(dir string, d volData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(filepath.Join(dir, volDataFile), b, 0o600); err != nil {
		return errors.New(logf("failed to save volume info data: %v", err))
	}
	return nil
}

func loadVolData(dir string) (volData, error) {
	var d volData
	b, err := regularfile.Read(filepath.Join(dir, volDataFile), 64<<10)
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(b, &d)
}

// csiDriver is the driver's CSIDriver object, nil when it has none (then it attaches, and gets
// no pod information, as the kubelet assumes).
func (m *Manager) csiDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if m.cfg.Client == nil {
		return nil, nil
	}
	d, err := m.cfg.Client.CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get CSIDriver %s: %w", name, err)
	}
	return d, nil
}

// attaches: the driver's volumes are attached by the attach/detach controller (as without a
// CSIDriver object).
func attaches(drv *storagev1.CSIDriver) bool {
	return drv == nil || drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired
}

// publishContext is the attachment's metadata for a driver that attaches: the kubelet waits for
// the VolumeAttachment the attach/detach controller made to be attached.
func (m *Manager) publishContext(ctx context.Context, drv *storagev1.CSIDriver, src *v1.CSIPersistentVolumeSource) (map[string]string, error) {
	if !attaches(drv) {
		return nil, nil
	}
	if m.cfg.Client == nil {
		return nil, errors.New(logf("driver %s attaches volumes, which needs a cluster", src.Driver))
	}
	name := attachmentName(src.VolumeHandle, src.Driver, m.cfg.NodeName)
	va, err := m.cfg.Client.VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("volume %s is not attached yet: %w", src.VolumeHandle, err)
	}
	if !va.Status.Attached {
		return nil, fmt.Errorf("volume %s is not attached yet: VolumeAttachment %s is not attached", src.VolumeHandle, name)
	}
	return va.Status.AttachmentMetadata, nil
}

func (m *Manager) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if m.cfg.Secrets == nil {
		return nil, fmt.Errorf("secret %s/%s: no API server", ref.Namespace, ref.Name)
	}
	data, err := m.cfg.Secrets(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("fetching secret %s/%s failed: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out, nil
}

func merged(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func onlyRWO(modes []v1.PersistentVolumeAccessMode) bool {
	return len(modes) == 1 && modes[0] == v1.ReadWriteOnce
}

// accessMode maps the PV's first access mode to CSI's, as the kubelet does.
func accessMode(modes []v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	if len(modes) == 0 {
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	}
	switch modes[0] {
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
}
