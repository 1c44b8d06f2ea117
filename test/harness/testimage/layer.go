package testimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DynamicBusyboxPath is where hack/install-extras.sh extracts Debian's dynamic busybox; the
// NODELET_DYNAMIC_BUSYBOX environment variable overrides it.
const DynamicBusyboxPath = "/usr/local/libexec/nodelet/busybox-dynamic"

// libDirs are searched, in order, for the shared libraries a dynamic busybox needs; the first four
// are the default search path of Debian's loader, so the libraries are found in the image without
// an ld.so.cache.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"}

var baseDirs = []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "etc", "proc", "sys",
	"dev", "root", "home", "var", "var/log", "var/run", "run", "mnt"}

func staticBusybox() (string, error) {
	if p := os.Getenv("NODELET_STATIC_BUSYBOX"); p != "" {
		return p, nil
	}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		return "/bin/busybox", nil
	}
	p, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("testimage: busybox not found: apt-get install -y busybox-static")
	}
	return p, nil
}

func dynamicBusybox() (string, error) {
	p := os.Getenv("NODELET_DYNAMIC_BUSYBOX")
	if p == "" {
		p = DynamicBusyboxPath
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testimage: dynamic busybox %s missing: run hack/install-extras.sh as root (%w)", p, err)
	}
	return p, nil
}

var appletCache sync.Map // binary path → []string

// applets lists the paths (relative, "usr/bin/wget") busybox installs its applets at.
func applets(bin string) ([]string, error) {
	if v, ok := appletCache.Load(bin); ok {
		return v.([]string), nil
	}
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("testimage: %s --list-full: %w", bin, err)
	}
	var list []string
	for _, l := range strings.Fields(string(out)) {
		l = strings.TrimPrefix(l, "/")
		if l != "" && l != "bin/busybox" && !strings.Contains(l, "..") {
			list = append(list, l)
		}
	}
	slices.Sort(list)
	appletCache.Store(bin, list)
	return list, nil
}

// sharedLibs returns the image paths of the loader and every library bin needs, with the host
// file that holds each.
func sharedLibs(bin string) (map[string]string, error) {
	libs := map[string]string{}
	seen := map[string]bool{} // library names already placed
	queue := []string{bin}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		f, err := elf.Open(cur)
		if err != nil {
			return nil, fmt.Errorf("testimage: %s: %w", cur, err)
		}
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b, err := io.ReadAll(p.Open())
			if err != nil {
				f.Close()
				return nil, err
			}
			interp := strings.TrimRight(string(b), "\x00")
			libs[interp] = interp
			seen[path.Base(interp)] = true
		}
		needed, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, n := range needed {
			if seen[n] {
				continue
			}
			seen[n] = true
			found := ""
			for _, d := range libDirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					found = filepath.Join(d, n)
					break
				}
			}
			if found == "" {
				return nil, fmt.Errorf("testimage: %s needs %s, not found in %v", cur, n, libDirs)
			}
			libs[found] = found
			queue = append(queue, found)
		}
	}
	return libs, nil
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// baseLayer is busybox with its applets, the libraries it loads, /etc/passwd, /etc/group and the
// usual directories.
func (b *builder) baseLayer() (v1.Layer, error) {
	var files []file
	for _, d := range baseDirs {
		files = append(files, file{path: d, mode: os.ModeDir | 0o755})
	}
	files = append(files,
		file{path: "tmp", mode: os.ModeDir | os.ModeSticky | 0o777},
		file{path: "etc/passwd", content: []byte(b.passwd()), mode: 0o644},
		file{path: "etc/group", content: []byte(b.group()), mode: 0o644},
	)
	var dynamic []string // binaries whose libraries the image needs
	if b.busybox != "-" {
		bin, err := staticBusybox()
		switch {
		case b.dynamic:
			bin, err = dynamicBusybox()
		case b.busybox != "":
			bin, err = b.busybox, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: "bin/busybox", content: data, mode: 0o755})
		list, err := applets(bin)
		if err != nil {
			return nil, err
		}
		// Hard links, not symlinks: /proc/PID/exe and comm then name the applet's own path,
		// as with a distribution's busybox image.
		inBin := map[string]bool{}
		for _, a := range list {
			files = append(files, file{path: a, link: "bin/busybox", mode: 0o755 | hardLink})
			if path.Dir(a) == "bin" {
				inBin[path.Base(a)] = true
			}
		}
		if b.allInBin {
			for _, a := range list {
				if n := path.Base(a); !inBin[n] {
					inBin[n] = true
					files = append(files, file{path: "bin/" + n, link: "bin/busybox", mode: 0o755 | hardLink})
				}
			}
		}
		if b.dynamic {
			dynamic = append(dynamic, bin)
		}
	}
	for _, p := range slices.Sorted(mapsKeys(b.hostBins)) {
		data, err := os.ReadFile(b.hostBins[p])
		if err != nil {
			return nil, fmt.Errorf("testimage: host binary: %w", err)
		}
		// A host binary replaces a busybox applet of the same path.
		files = slices.DeleteFunc(files, func(f file) bool { return f.path == p })
		files = append(files, file{path: p, content: data, mode: 0o755})
		dynamic = append(dynamic, b.hostBins[p])
	}
	libs := map[string]string{}
	for _, bin := range dynamic {
		l, err := sharedLibs(bin)
		if err != nil {
			return nil, err
		}
		maps.Copy(libs, l)
	}
	for _, p := range slices.Sorted(mapsKeys(libs)) {
		data, err := os.ReadFile(libs[p])
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: p, content: data, mode: 0o755})
	}
	return layerOf(files)
}

func (b *builder) passwd() string {
	var s strings.Builder
	seen := map[string]bool{}
	for _, u := range b.users {
		if seen[u.Name] {
			continue
		}
		seen[u.Name] = true
		home := u.Home
		if home == "" {
			home = "/"
		}
		fmt.Fprintf(&s, "%s:x:%d:%d:%s:%s:/bin/sh\n", u.Name, u.UID, u.GID, u.Name, home)
	}
	return s.String()
}

func (b *builder) group() string {
	groups := slices.Clone(b.groups)
	for _, u := range b.users {
		if !slices.ContainsFunc(groups, func(g Group) bool { return g.GID == u.GID }) {
			groups = append(groups, Group{Name: u.Name, GID: u.GID})
		}
	}
	var s strings.Builder
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		fmt.Fprintf(&s, "%s:x:%d:%s\n", g.Name, g.GID, strings.Join(g.Members, ","))
	}
	return s.String()
}

// hardLink marks a file entry as a hard link to file.link. It reuses a FileMode bit no regular
// option sets.
const hardLink = os.ModeDevice

// layerOf writes files into an uncompressed tar, with parent directories first, and wraps it as
// a gzip layer.
func layerOf(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	var mkParents func(p string) error
	mkParents = func(p string) error {
		dir := path.Dir(p)
		if dir == "." || dir == "/" || made[dir] {
			return nil
		}
		if err := mkParents(dir); err != nil {
			return err
		}
		made[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	for _, f := range files {
		name := strings.Trim(path.Clean("/"+f.path), "/")
		if name == "" {
			continue
		}
		if err := mkParents(name); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: name, Mode: tarMode(f.mode), Uid: f.uid, Gid: f.gid, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.mode&hardLink != 0:
			h.Typeflag, h.Linkname = tar.TypeLink, f.link
		case f.mode&os.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		case f.mode.IsDir():
			if made[name] {
				continue
			}
			made[name] = true
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.content); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

func tarMode(m os.FileMode) int64 {
	mode := int64(m.Perm())
	if m&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// noise is size bytes of deterministic, incompressible data.
func noise(seed, size int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 'n', 'o', 'd', 'e', 'l', 'e', 't'})
	out := make([]byte, size)
	_, _ = r.Read(out)
	return out
}
