package podvalidation

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateHostUsers refuses what the API server refuses beside spec.hostUsers: false: the host's
// network, PID or IPC namespace (a container in its own user namespace cannot usefully share
// them), and volumeDevices (a block device cannot be idmapped). The field paths are the API
// server's, spelling included.
func validateHostUsers(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	var errs field.ErrorList
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(fld.Child("hostNetwork"), "when `hostUsers` is false"))
	}
	if spec.HostPID {
		errs = append(errs, field.Forbidden(fld.Child("HostPID"), "when `hostUsers` is false"))
	}
	if spec.HostIPC {
		errs = append(errs, field.Forbidden(fld.Child("HostIPC"), "when `hostUsers` is false"))
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.cs {
			if len(list.cs[i].VolumeDevices) > 0 {
				errs = append(errs, field.Forbidden(fld.Child(list.name).Index(i).Child("volumeDevices"), "when `hostUsers` is false"))
			}
		}
	}
	for i := range spec.EphemeralContainers {
		if len(spec.EphemeralContainers[i].VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("ephemeralContainers").Index(i).Child("volumeDevices"), "when `hostUsers` is false"))
		}
	}
	return errs
}
