package volumemanager

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// File is one file of a secret, configMap, downwardAPI or projected volume.
type File struct {
	Data []byte
	Mode os.FileMode
}

const dataDirName = "..data"

// WriteAtomic publishes files in dir so that a reader inside a container sees the old set or the
// new set, never a mix — the kubelet's layout, which applications watching for updates rely on:
//
//	dir/..2026_11_22_02_30_00.123456789/<files>   one generation
//	dir/..data -> ..2026_11_22_02_30_00.123456789 swapped by one rename(2)
//	dir/<top> -> ..data/<top>                     user-visible names
//
// Unchanged content leaves dir as it is (no new generation, no inotify noise). Paths are relative
// without ".." (checked: a key is user input).
//
// With the pod's fsGroup, as the kubelet's volume ownership: every file and folder belongs to that
// group, files are group-readable (the volume is read-only to containers), folders are
// group-searchable and setgid.
func WriteAtomic(dir string, files map[string]File, fsGroup *int64) (changed bool, err error) {
	for p := range files {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "..") || filepath.Clean(p) != p {
			return false, fmt.Errorf("file %q: %w", p, ErrBadSubPath)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	if err := own(dir, true, fsGroup); err != nil {
		return false, err
	}
	oldGen, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if oldGen != "" && same(filepath.Join(dir, oldGen), files, fsGroup) {
		return false, nil
	}
	gen, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := writeGeneration(gen, files, fsGroup); err != nil {
		os.RemoveAll(gen)
		return false, err
	}
	if err := os.Chmod(gen, 0o755); err == nil {
		err = own(gen, true, fsGroup)
	}
	if err != nil {
		os.RemoveAll(gen)
		return false, err
	}
	tmp := filepath.Join(dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		os.RemoveAll(gen)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDirName)); err != nil {
		os.Remove(tmp)
		os.RemoveAll(gen)
		return false, err
	}
	// Top-level names: add the new ones, drop those no longer in the set.
	tops := map[string]bool{}
	for p := range files {
		tops[strings.SplitN(p, "/", 2)[0]] = true
	}
	for t := range tops {
		link := filepath.Join(dir, t)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, t), link); err != nil {
			return true, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true, err
	}
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, ".."):
			if n != dataDirName && n != filepath.Base(gen) && e.IsDir() {
				os.RemoveAll(filepath.Join(dir, n))
			}
		case !tops[n] && e.Type()&os.ModeSymlink != 0:
			os.Remove(filepath.Join(dir, n))
		}
	}
	return true, nil
}

func writeGeneration(gen string, files map[string]File, fsGroup *int64) error {
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		f := files[p]
		full := filepath.Join(gen, p)
		var dirs []string
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			d := filepath.Join(gen, dirs[i])
			if err := os.Mkdir(d, 0o755); errors.Is(err, os.ErrExist) {
				continue
			} else if err != nil {
				return err
			}
			if err := own(d, true, fsGroup); err != nil {
				return err
			}
		}
		mode := wantMode(f, fsGroup)
		if err := os.WriteFile(full, f.Data, mode); err != nil {
			return err
		}
		// WriteFile's mode passes the umask; the volume's defaultMode must hold exactly.
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
		if err := own(full, false, fsGroup); err != nil {
			return err
		}
	}
	return nil
}

// own gives path to the fsGroup (nil: leaves it alone); a folder also gets group search and the
// setgid bit, so what is made in it later belongs to the group too.
func own(path string, dir bool, fsGroup *int64) error {
	if fsGroup == nil {
		return nil
	}
	if err := os.Lchown(path, -1, int(*fsGroup)); err != nil {
		return err
	}
	if !dir {
		return nil
	}
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	// The sticky and setuid bits stay, as the kubelet's SetVolumeOwnership keeps them.
	return os.Chmod(path, st.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetuid)|0o050|os.ModeSetgid)
}

// same reports whether generation dir holds exactly files, owned as fsGroup asks.
func same(gen string, files map[string]File, fsGroup *int64) bool {
	n := 0
	err := filepath.WalkDir(gen, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(gen, p)
		f, ok := files[rel]
		if !ok {
			return errors.New("extra")
		}
		n++
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != wantMode(f, fsGroup) {
			return errors.New("mode")
		}
		if st, ok := info.Sys().(*syscall.Stat_t); fsGroup != nil && (!ok || int64(st.Gid) != *fsGroup) {
			return errors.New("group")
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errors.New("data")
		}
		return nil
	})
	return err == nil && n == len(files)
}

func wantMode(f File, fsGroup *int64) os.FileMode {
	m := f.Mode.Perm()
	if f.Mode == 0 {
		m = 0o644
	}
	if fsGroup != nil {
		// The kubelet's ownership mask for a read-only volume: owner and group may read.
		m |= 0o440
	}
	return m
}
