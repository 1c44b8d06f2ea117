package engine

import (
	"os"
	"path/filepath"
)

// privateLogDir makes the dir of a container's log file, or makes an existing one (the kubelet
// makes them 0755), reachable by root only: logs carry whatever the container prints, secrets
// included, and conmon writes them as root for the kubelet, which reads them as root.
func privateLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// tightenPodDirs takes away what others may do in the per-pod dirs under dir that an older
// version made 0755, so an upgrade without a reboot leaves no pod open.
func tightenPodDirs(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o700); err != nil {
			return err
		}
	}
	return nil
}
