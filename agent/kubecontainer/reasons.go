package kubecontainer

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Reasons a container is waiting, as the kubelet spells them; users and tools match on these strings.
const (
	ReasonContainerCreating  = "ContainerCreating"
	ReasonPodInitializing    = "PodInitializing"
	ReasonCrashLoopBackOff   = "CrashLoopBackOff"
	ReasonErrImagePull       = "ErrImagePull"
	ReasonImagePullBackOff   = "ImagePullBackOff"
	ReasonErrImageNeverPull  = "ErrImageNeverPull"
	ReasonInvalidImageName   = "InvalidImageName"
	ReasonCreateContainerErr = "CreateContainerError"
	ReasonCreateConfigError  = "CreateContainerConfigError"
	ReasonRunContainerError  = "RunContainerError"
	ReasonPreStartHookError  = "PreStartHookError"
)

// Errors a sync step returns; the reason cache and the status manager turn them into waiting reasons.
var (
	ErrCrashLoopBackOff = errors.New(ReasonCrashLoopBackOff)
	ErrImagePull        = errors.New(ReasonErrImagePull)
	ErrImagePullBackOff = errors.New(ReasonImagePullBackOff)
	ErrImageNeverPull   = errors.New(ReasonErrImageNeverPull)
	ErrInvalidImageName = errors.New(ReasonInvalidImageName)
	ErrCreateContainer  = errors.New(ReasonCreateContainerErr)
	ErrCreateConfig     = errors.New(ReasonCreateConfigError)
	ErrRunContainer     = errors.New(ReasonRunContainerError)
)

// ReasonFor names the reason an error carries, or "" when it carries none of the known ones.
func ReasonFor(err error) string {
	// In this order (a list of variables at package level would take code at init to fill).
	for _, e := range [...]error{ErrCrashLoopBackOff, ErrImagePullBackOff, ErrImagePull, ErrImageNeverPull,
		ErrInvalidImageName, ErrCreateConfig, ErrCreateContainer, ErrRunContainer} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ""
}

// WaitingReason is why a container last failed to start.
type WaitingReason struct {
	Reason  string
	Message string
}

// ReasonCache remembers, per pod and container name, why the last start attempt failed, so the
// status computed between syncs shows CrashLoopBackOff or ImagePullBackOff rather than a bare
// "exited". A successful start clears the entry.
type ReasonCache struct {
	mu sync.Mutex
	m  map[types.UID]map[string]WaitingReason
}

// NewReasonCache makes an empty cache.
func NewReasonCache() *ReasonCache {
	return &ReasonCache{m: map[types.UID]map[string]WaitingReason{}}
}

// Update records err for the container, or clears the entry when err is nil.
func (c *ReasonCache) Update(uid types.UID, name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.m[uid], name)
		return
	}
	reason := ReasonFor(err)
	if reason == "" {
		reason = ReasonRunContainerError
	}
	if c.m[uid] == nil {
		c.m[uid] = map[string]WaitingReason{}
	}
	c.m[uid][name] = WaitingReason{Reason: reason, Message: err.Error()}
}

// Get returns the recorded reason.
func (c *ReasonCache) Get(uid types.UID, name string) (WaitingReason, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[uid][name]
	return r, ok
}

// Forget drops a pod.
func (c *ReasonCache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}
