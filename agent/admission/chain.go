package admission

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/cm/cpumanager"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
)

// Attributes are what an admit handler decides on (the kubelet's lifecycle.PodAdmitAttributes).
type Attributes struct {
	Pod *v1.Pod
	// OtherPods are the pods admitted on this node whose workers have not finished, without Pod.
	OtherPods []*v1.Pod
}

// AdmitHandler is one check of a new pod (the kubelet's lifecycle.PodAdmitHandler).
type AdmitHandler interface {
	Admit(attrs *Attributes) Result
}

// Error is a refusal: the reason and message the pod's status and event get.
type Error struct{ Reason, Message string }

func (e *Error) Error() string { return e.Message }

// PodState is what the chain reads of the other pods' lives (podstate.View).
type PodState interface {
	IsPodKnownFinished(types.UID) bool
}

// EvictionAdmitter refuses pods the node's pressure cannot take (*eviction.Manager); an empty
// reason admits.
type EvictionAdmitter interface {
	Admit(pod *v1.Pod) (reason, message string)
}

// CPUAdmitter gives a pod its exclusive CPUs or refuses it (*cpumanager.Manager).
type CPUAdmitter interface {
	Admit(pod *v1.Pod) error
}

// DeviceAdmitter gives a pod's containers the device plugins' devices they ask for
// (*devicemanager.Manager); the error is why it cannot.
type DeviceAdmitter interface {
	Admit(pod *v1.Pod) error
}

// Parts are where the admit handlers come from; a nil part leaves its handler out.
type Parts struct {
	Eviction   EvictionAdmitter
	Sysctls    *sysctl.Allowlist
	MaxPods    int
	Predicates *Handler
	AppArmor   *AppArmor
	CPUs       CPUAdmitter
	Devices    DeviceAdmitter
}

// Chain is the node's ordered admit handlers; the first refusal is the pod's.
type Chain struct {
	handlers []AdmitHandler
	state    PodState
}

// NewChain orders the handlers as the kubelet does: the node's pressure (Evicted), the pod's
// sysctls (SysctlForbidden), the pod limit (OutOfpods), the general predicates (resources, node
// affinity, host ports, NoExecute taints…), AppArmor, resource claims
// (FailedPrepareDynamicResources: no DRA driver here), and last the CPU manager, as the kubelet's
// topology admit handler: it takes CPUs, which a later refusal would have to give back; then
// the device manager, which the kubelet's topology handler also asks, after the CPU manager.
func NewChain(p Parts, state PodState) *Chain {
	var hs []AdmitHandler
	if p.Eviction != nil {
		hs = append(hs, evictionHandler{p.Eviction})
	}
	if p.Sysctls != nil {
		hs = append(hs, sysctlHandler{p.Sysctls})
	}
	hs = append(hs, maxPodsHandler(p.MaxPods))
	if p.Predicates != nil {
		hs = append(hs, predicateHandler{p.Predicates})
	}
	if p.AppArmor != nil {
		hs = append(hs, appArmorHandler{p.AppArmor})
	}
	hs = append(hs, HandlerFunc(func(a *Attributes) Result { return AdmitResourceClaims(a.Pod) }))
	if p.CPUs != nil {
		hs = append(hs, cpuHandler{p.CPUs})
	}
	if p.Devices != nil {
		hs = append(hs, deviceHandler{p.Devices})
	}
	return &Chain{handlers: hs, state: state}
}

// Admit decides whether pod may run beside active, the pods admitted so far; a refusal is an
// *Error. Pods whose workers have finished hold nothing and are not counted.
func (c *Chain) Admit(pod *v1.Pod, active []*v1.Pod) error {
	others := make([]*v1.Pod, 0, len(active))
	for _, p := range active {
		if p.UID != pod.UID && (c.state == nil || !c.state.IsPodKnownFinished(p.UID)) {
			others = append(others, p)
		}
	}
	attrs := &Attributes{Pod: pod, OtherPods: others}
	for _, h := range c.handlers {
		if r := h.Admit(attrs); !r.Admit {
			return &Error{Reason: r.Reason, Message: r.Message}
		}
	}
	return nil
}

// HandlerFunc is an AdmitHandler of one function.
type HandlerFunc func(*Attributes) Result

func (f HandlerFunc) Admit(a *Attributes) Result { return f(a) }

type evictionHandler struct{ e EvictionAdmitter }

func (h evictionHandler) Admit(a *Attributes) Result {
	if reason, msg := h.e.Admit(a.Pod); reason != "" {
		return Result{Reason: reason, Message: msg}
	}
	return Result{Admit: true}
}

type sysctlHandler struct{ allow *sysctl.Allowlist }

func (h sysctlHandler) Admit(a *Attributes) Result {
	if err := h.allow.Admit(a.Pod); err != nil {
		return Result{Reason: sysctl.ForbiddenReason, Message: err.Error()}
	}
	return Result{Admit: true}
}

// OutOfPods is the reason a pod beyond --max-pods is refused with, as the kubelet spells it.
const OutOfPods = "OutOfpods"

type maxPodsHandler int

func (n maxPodsHandler) Admit(a *Attributes) Result {
	if len(a.OtherPods) >= int(n) {
		return Result{Reason: OutOfPods, Message: fmt.Sprintf("node has reached its pod limit of %d", n)}
	}
	return Result{Admit: true}
}

type predicateHandler struct{ h *Handler }

func (h predicateHandler) Admit(a *Attributes) Result { return h.h.Admit(a.Pod, a.OtherPods) }

type appArmorHandler struct{ a *AppArmor }

func (h appArmorHandler) Admit(a *Attributes) Result { return h.a.Admit(a.Pod) }

type cpuHandler struct{ cpus CPUAdmitter }

func (h cpuHandler) Admit(a *Attributes) Result {
	err := h.cpus.Admit(a.Pod)
	if err == nil {
		return Result{Admit: true}
	}
	var ae *cpumanager.AdmitError
	if errors.As(err, &ae) {
		return Result{Reason: ae.Reason, Message: ae.Message}
	}
	// An error without a reason of its own is reported as the SyncLoop always reported one.
	return Result{Reason: OutOfPods, Message: err.Error()}
}

type deviceHandler struct{ d DeviceAdmitter }

func (h deviceHandler) Admit(a *Attributes) Result {
	if err := h.d.Admit(a.Pod); err != nil {
		return Result{Reason: UnexpectedAdmissionError, Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	return Result{Admit: true}
}
