package volumemanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// ErrHostPathType: the path exists but is not what the volume's type demands, or is missing and
// the type does not create it.
var ErrHostPathType = errors.New("hostPath type check failed")

// CheckHostPath creates what an ...OrCreate type asks for and checks the rest. The empty type
// checks nothing, as upstream.
func CheckHostPath(h *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	p := h.Path
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return os.MkdirAll(p, 0o755)
		}
		return want(p, t, os.ModeDir)
	case v1.HostPathFileOrCreate:
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			if f != nil {
				f.Close()
			}
		}
		return want(p, t, 0)
	case v1.HostPathDirectory:
		return want(p, t, os.ModeDir)
	case v1.HostPathFile:
		return want(p, t, 0)
	case v1.HostPathSocket:
		return want(p, t, os.ModeSocket)
	case v1.HostPathCharDev:
		return want(p, t, os.ModeDevice|os.ModeCharDevice)
	case v1.HostPathBlockDev:
		return want(p, t, os.ModeDevice)
	}
	return fmt.Errorf("hostPath type %q: %w", t, ErrHostPathType)
}

// want stats p (following symlinks, as the kubelet does) and compares its type bits.
func want(p string, t v1.HostPathType, mode os.FileMode) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", p, t, errors.Join(ErrHostPathType, err))
	}
	if st.Mode().Type() != mode {
		return fmt.Errorf("%s is not a %s (it is %v): %w", p, t, st.Mode().Type(), ErrHostPathType)
	}
	return nil
}
