package kuberuntime

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/nodelet/nodelet/agent/container"
)

// ConfigError is a container the agent will not create as specified; the pod's status shows
// CreateContainerConfigError with exactly this message, as the kubelet words it.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Is makes errors.Is(err, kubecontainer.ErrCreateConfig) hold, so the reason cache finds the reason.
func (e *ConfigError) Is(target error) bool { return target == kubecontainer.ErrCreateConfig }

// kubeletPodName is how the kubelet names a pod in messages users and tools match on: name_namespace(uid).
func kubeletPodName(pod *v1.Pod) string {
	return fmt.Sprintf("%s(%s)", kubecontainer.BuildPodFullName(pod.Name, pod.Namespace), pod.UID)
}

// effectiveNonRoot is the container's runAsNonRoot and runAsUser, each falling back to the pod's.
func effectiveNonRoot(pod *v1.Pod, c *v1.Container) (nonRoot bool, runAsUser *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		runAsUser = psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
	}
	return nonRoot, runAsUser
}

// imageUser is the user the image runs as by the runtime's ImageStatus: a uid, or a name that
// cannot be checked. An image that names no user runs as root.
func (m *Manager) imageUser(ctx context.Context, imageRef string) (*int64, string, error) {
	resp, err := m.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageRef}})
	if err != nil {
		return nil, "", fmt.Errorf("image status %s: %w", imageRef, err)
	}
	img := resp.GetImage()
	if uid := img.GetUid(); uid != nil {
		return &uid.Value, "", nil
	}
	if name := img.GetUsername(); name != "" {
		// A runtime that passes "uid[:gid]" through as a name still means a uid.
		user, _, _ := strings.Cut(name, ":")
		if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
			return &uid, "", nil
		}
		return nil, name, nil
	}
	root := int64(0)
	return &root, "", nil
}

// verifyRunAsNonRoot refuses a container whose effective runAsNonRoot is true but which would run
// as root: runAsUser 0, or no runAsUser and an image user that is root or cannot be checked.
func (m *Manager) verifyRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	nonRoot, runAsUser := effectiveNonRoot(pod, c)
	if !nonRoot {
		return nil
	}
	if runAsUser != nil {
		if *runAsUser == 0 {
			return &ConfigError{fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", kubeletPodName(pod), c.Name)}
		}
		return nil
	}
	uid, name, err := m.imageUser(ctx, imageRef)
	if err != nil {
		return &ConfigError{err.Error()}
	}
	switch {
	case uid == nil:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			name, kubeletPodName(pod), c.Name)}
	case *uid == 0:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", kubeletPodName(pod), c.Name)}
	}
	if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*uid, math.MaxInt32, strings.Join(errs, "; "), kubeletPodName(pod), c.Name)}
	}
	return nil
}
