// Package atomicfile replaces a file so that readers, and a restart after a crash, see either the
// old content or the new, never a mix: a temporary file in the same folder, named with a leading
// dot so that folder watchers and loaders skip it, written, given its mode, synced, and renamed
// over the target.
//
// Write also syncs the folder, so the new content is what a restart after a power loss finds.
// Replace does not: after a power loss the old content (or, for a new file, no file) may come
// back, but never a torn one, since the data reached the disk before the rename could. That is
// enough for records that only mirror what processes and mounts the machine holds, which a reboot
// ends anyway, and it saves a journal commit on every write of a pod's start.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode, and returns once the replacement is on disk.
func Write(path string, data []byte, mode os.FileMode) error {
	if err := Replace(path, data, mode); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Replace replaces path with data, with mode; a power loss may undo the replacement, never tear it.
func Replace(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
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
	return nil
}
