package oci

// SecurityModules is what a container's spec needs of the kernel's Linux security modules. Specs
// are made against this machine's (HostSecurityModules) unless a SpecInput names others, which is
// how the paths of a host with AppArmor or SELinux are tested on one without.
type SecurityModules interface {
	// AppArmorEnabled reports whether the kernel enforces AppArmor.
	AppArmorEnabled() bool
	// AppArmorLoaded reports whether the kernel holds a profile of that name.
	AppArmorLoaded(name string) (bool, error)
	// LoadAppArmor loads the policy text's profile, replacing one of the same name.
	LoadAppArmor(policy []byte) error
	// SELinuxEnabled reports whether the kernel runs SELinux.
	SELinuxEnabled() bool
	// SELinuxContainerContexts are the policy's contexts for container processes and their files.
	SELinuxContainerContexts() (process, file string, err error)
}

// hostModules are this machine's security modules.
type hostModules struct{}

// HostSecurityModules are this machine's security modules.
var HostSecurityModules SecurityModules = hostModules{}

func (in SpecInput) securityModules() SecurityModules {
	if in.LSM != nil {
		return in.LSM
	}
	return HostSecurityModules
}
