package admission

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/apparmor"
)

// AppArmorNotAdmitted is the reason a pod is rejected with when its AppArmor profiles cannot be
// enforced, as the kubelet spells it.
const AppArmorNotAdmitted = "AppArmor"

// AppArmor is the kubelet's AppArmor admit handler: a pod asking for any profile other than
// unconfined is refused on a host whose kernel does not enforce AppArmor, rather than run with
// less confinement than its author asked for.
type AppArmor struct {
	// hostErr is why the host cannot enforce profiles, nil when it can; found once, at start.
	hostErr error
}

// NewAppArmor checks the host with enabled (nil: this machine's kernel).
func NewAppArmor(enabled func() bool) *AppArmor {
	if enabled == nil {
		enabled = apparmor.Enabled
	}
	if !enabled() {
		return &AppArmor{hostErr: errors.New("AppArmor is not enabled on the host")}
	}
	return &AppArmor{}
}

// Admit refuses a pending pod that asks for AppArmor where it cannot be enforced, or that names an
// empty Localhost profile. A pod past pending was admitted before and is left alone. Static pods
// carry no phase until their first status, so "" counts as pending.
func (a *AppArmor) Admit(pod *v1.Pod) Result {
	if pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		return Result{Admit: true}
	}
	if err := a.validate(pod); err != nil {
		return Result{Reason: AppArmorNotAdmitted, Message: fmt.Sprintf("Cannot enforce AppArmor: %v", err)}
	}
	return Result{Admit: true}
}

func (a *AppArmor) validate(pod *v1.Pod) error {
	if !apparmor.Required(pod) {
		return nil
	}
	if a.hostErr != nil {
		return a.hostErr
	}
	for _, c := range apparmor.Containers(pod) {
		p := apparmor.Profile(pod, c)
		if p == nil || p.Type != v1.AppArmorProfileTypeLocalhost {
			continue
		}
		if p.LocalhostProfile == nil {
			return errors.New(`invalid empty AppArmor profile name: ""`)
		}
		if strings.TrimSpace(*p.LocalhostProfile) == "" {
			return fmt.Errorf("invalid empty AppArmor profile name: %q", *p.LocalhostProfile)
		}
	}
	return nil
}
