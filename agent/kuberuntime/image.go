package kuberuntime

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/nodelet/nodelet/agent/container"
)

// imagePuller applies imagePullPolicy and backs off failed pulls per pod and image, so a bad image
// name costs one pull every 10s…5m rather than one per sync.
type imagePuller struct {
	images   runtimeapi.ImageServiceClient
	backOff  *BackOff
	recorder record.EventRecorder
	now      func() time.Time
	// credentials may be nil.
	credentials PullCredentials
}

func newImagePuller(images runtimeapi.ImageServiceClient, b *BackOff, r record.EventRecorder, now func() time.Time) *imagePuller {
	return &imagePuller{images: images, backOff: b, recorder: r, now: now}
}

// EnsureImageExists returns the image reference to create the container from.
func (p *imagePuller) EnsureImageExists(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error) {
	if c.Image == "" || strings.ContainsAny(c.Image, " \t\n") {
		p.recorder.Eventf(pod, v1.EventTypeWarning, "InspectFailed", "Failed to apply default image tag %q", c.Image)
		return "", fmt.Errorf("image %q: %w", c.Image, kubecontainer.ErrInvalidImageName)
	}
	image := applyDefaultImageTag(c.Image)
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}

	present := ""
	st, err := p.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		return "", fmt.Errorf("image status %q: %w: %v", image, kubecontainer.ErrImagePull, err)
	}
	if st.Image != nil {
		present = st.Image.Id
	}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if strings.HasSuffix(image, ":latest") {
			policy = v1.PullAlways
		}
	}
	switch {
	case policy == v1.PullNever && present == "":
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		p.recorder.Event(pod, v1.EventTypeWarning, kubecontainer.ReasonErrImageNeverPull, msg)
		return "", fmt.Errorf("%s: %w", msg, kubecontainer.ErrImageNeverPull)
	case present != "" && policy != v1.PullAlways:
		return present, nil
	}

	key := string(pod.UID) + "/" + image
	if p.backOff.InBackOffSinceUpdate(key) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		p.recorder.Event(pod, v1.EventTypeNormal, "BackOff", msg)
		return "", fmt.Errorf("%s: %w", msg, kubecontainer.ErrImagePullBackOff)
	}
	p.recorder.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	start := p.now()
	resp, err := p.pull(ctx, pod, spec, sandboxCfg)
	if err != nil {
		p.backOff.Next(key, p.now())
		p.recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", c.Image, err)
		return "", fmt.Errorf("pull image %q: %w: %v", c.Image, kubecontainer.ErrImagePull, err)
	}
	p.backOff.Reset(key)
	p.recorder.Eventf(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s", c.Image, p.now().Sub(start).Round(time.Millisecond))
	if resp.ImageRef != "" {
		return resp.ImageRef, nil
	}
	return image, nil
}

// pull tries each credential of the pod for the image's registry, then none.
func (p *imagePuller) pull(ctx context.Context, pod *v1.Pod, spec *runtimeapi.ImageSpec, sandboxCfg *runtimeapi.PodSandboxConfig) (*runtimeapi.PullImageResponse, error) {
	var auths []*runtimeapi.AuthConfig
	if p.credentials != nil {
		auths = p.credentials.For(ctx, pod, spec.Image)
	}
	auths = append(auths, nil)
	var err error
	for _, a := range auths {
		var resp *runtimeapi.PullImageResponse
		resp, err = p.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: a, SandboxConfig: sandboxCfg})
		if err == nil {
			return resp, nil
		}
	}
	return nil, err
}
