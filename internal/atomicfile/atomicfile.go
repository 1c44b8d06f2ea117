// Package atomicfile replaces a file so that readers, and a restart after a crash, see either the
// old content or the new, never a mix: a temporary file in the same folder, named with a leading
// dot so that folder watchers and loaders skip it, written, given its mode, synced, renamed over
// the target, and the folder synced so the rename itself survives a crash.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode.
func Write(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
