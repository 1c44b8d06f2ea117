// Package images is the agent's image manager: imagePullPolicy with the kubelet's defaults, pulls
// with the pod's imagePullSecrets, back-off after a failed pull, serialized or parallel pulls, the
// Pulling/Pulled events, and (gc.go) image garbage collection driven by the image filesystem's usage.
package images

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nodelet/nodelet/agent/recorder"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/backoff"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// ImageService is the part of CRI's ImageService the manager and the collector use.
type ImageService interface {
	ImageStatus(ctx context.Context, in *runtimeapi.ImageStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, opts ...grpc.CallOption) (*runtimeapi.PullImageResponse, error)
	ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, opts ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error)
	RemoveImage(ctx context.Context, in *runtimeapi.RemoveImageRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error)
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
}

// Credentials are the pod's registry credentials for an image, tried in order (*credentials.Keyring).
type Credentials interface {
	For(ctx context.Context, pod *v1.Pod, image string) []*runtimeapi.AuthConfig
}

// Options configure a Manager; zero values are the kubelet's defaults.
type Options struct {
	// SerializeImagePulls pulls one image at a time (the kubelet's default: true).
	SerializeImagePulls *bool
	// MaxParallelImagePulls bounds parallel pulls when not serialized; 0 or less: no bound.
	MaxParallelImagePulls int32
	// BackOffInitial and BackOffMax bound the wait after a failed pull (10s, 5m).
	BackOffInitial, BackOffMax time.Duration
	Credentials                Credentials
	Recorder                   recorder.Interface
	// Used tells the garbage collector an image is in use as soon as a container asks for it.
	Used func(imageID string)
	// Now is the back-off's clock; nil is time.Now.
	Now func() time.Time
}

// Manager ensures images are present as the pull policy says.
type Manager struct {
	images  ImageService
	opts    Options
	puller  *puller
	backOff *backoff.BackOff
}

// NewManager makes a manager.
func NewManager(images ImageService, o Options) *Manager {
	if o.BackOffInitial == 0 {
		o.BackOffInitial = 10 * time.Second
	}
	if o.BackOffMax == 0 {
		o.BackOffMax = 5 * time.Minute
	}
	if o.Recorder == nil {
		o.Recorder = recorder.Discard{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	limit := 1
	if o.SerializeImagePulls != nil && !*o.SerializeImagePulls {
		limit = int(o.MaxParallelImagePulls)
	}
	return &Manager{images: images, opts: o, puller: newPuller(images, limit),
		backOff: backoff.New(o.BackOffInitial, o.BackOffMax, o.Now)}
}

// DefaultTag adds ":latest" to a name with neither tag nor digest.
func DefaultTag(image string) string {
	if strings.Contains(image, "@") {
		return image
	}
	if i := strings.LastIndexByte(image, '/'); strings.Contains(image[i+1:], ":") {
		return image
	}
	return image + ":latest"
}

// PullPolicy is the container's policy, or the kubelet's default: Always for ":latest" (or no
// tag), IfNotPresent otherwise.
func PullPolicy(c *v1.Container) v1.PullPolicy {
	return defaultPullPolicy(c.Image, c.ImagePullPolicy)
}

// VolumePullPolicy is an image volume's policy, with the same default as a container's.
func VolumePullPolicy(v *v1.ImageVolumeSource) v1.PullPolicy {
	return defaultPullPolicy(v.Reference, v.PullPolicy)
}

func defaultPullPolicy(image string, policy v1.PullPolicy) v1.PullPolicy {
	if policy != "" {
		return policy
	}
	if strings.HasSuffix(DefaultTag(image), ":latest") {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// EnsureImageExists returns the reference to create c from, pulling as its policy says. The error
// wraps the reason the container waits with (ErrImagePull, ErrImagePullBackOff, ErrImageNeverPull,
// ErrInvalidImageName).
func (m *Manager) EnsureImageExists(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	return m.EnsureImage(ctx, pod, c.Image, PullPolicy(c), sandbox)
}

// EnsureImage is EnsureImageExists for any image of the pod (an image volume's): requested is the
// name as the pod spells it, policy its pull policy with defaults applied.
func (m *Manager) EnsureImage(ctx context.Context, pod *v1.Pod, requested string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	rec := m.opts.Recorder
	if requested == "" || strings.ContainsAny(requested, " \t\n") {
		rec.Eventf(pod, v1.EventTypeWarning, "InspectFailed", "Failed to apply default image tag %q", requested)
		return "", fmt.Errorf("image %q: %w", requested, kubecontainer.ErrInvalidImageName)
	}
	image := DefaultTag(requested)
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: requested}
	st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		return "", fmt.Errorf("image status %q: %w: %v", image, kubecontainer.ErrImagePull, err)
	}
	present := ""
	if st.Image != nil {
		present = st.Image.Id
	}
	switch {
	case present != "" && policy != v1.PullAlways:
		rec.Eventf(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", requested)
		m.used(present)
		return present, nil
	case policy == v1.PullNever:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", requested)
		rec.Event(pod, v1.EventTypeWarning, kubecontainer.ReasonErrImageNeverPull, msg)
		return "", fmt.Errorf("%s: %w", msg, kubecontainer.ErrImageNeverPull)
	}

	key := string(pod.UID) + "/" + image
	if m.backOff.InBackOffSinceUpdate(key) {
		msg := fmt.Sprintf("Back-off pulling image %q", requested)
		rec.Event(pod, v1.EventTypeNormal, "BackOff", msg)
		return "", fmt.Errorf("%s: %w", msg, kubecontainer.ErrImagePullBackOff)
	}
	rec.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", requested)
	var auths []*runtimeapi.AuthConfig
	if m.opts.Credentials != nil {
		auths = m.opts.Credentials.For(ctx, pod, image)
	}
	metrics.PodStarts.ImagePullStarted(pod.UID)
	res := m.puller.pull(ctx, &runtimeapi.PullImageRequest{Image: spec, SandboxConfig: sandbox}, auths)
	metrics.PodStarts.ImagePullFinished(pod.UID)
	if res.err != nil {
		m.backOff.Next(key, m.opts.Now())
		rec.Eventf(pod, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", requested, res.err)
		return "", fmt.Errorf("pull image %q: %w: %v", requested, kubecontainer.ErrImagePull, res.err)
	}
	m.backOff.Reset(key)
	rec.Eventf(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.",
		requested, res.pulling.Round(time.Millisecond), res.total.Round(time.Millisecond), res.size)
	ref := res.ref
	if ref == "" {
		ref = image
	}
	m.used(res.id)
	return ref, nil
}

func (m *Manager) used(id string) {
	if m.opts.Used != nil && id != "" {
		m.opts.Used(id)
	}
}

// GC drops back-off entries that have gone quiet.
func (m *Manager) GC() { m.backOff.GC() }
