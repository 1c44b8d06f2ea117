// Package nsmgr pins a pod's namespaces without a process: a throwaway OS thread unshares them and
// bind-mounts its own namespace files onto files under the state dir, then dies. The bind mounts
// keep the namespaces alive until Remove, so no pause process is needed and the pins survive a
// restart of the daemon (not of the machine: the state dir is volatile, as the namespaces are).
package nsmgr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
)

// Kind is a namespace type, named as in /proc/<pid>/ns.
type Kind string

const (
	Net Kind = "net"
	IPC Kind = "ipc"
	UTS Kind = "uts"
	PID Kind = "pid"
	// User is a pod's own user namespace (see PinFrom); the pod's other namespaces are then
	// owned by it.
	User Kind = "user"
)

// Kinds lists every kind a Manager may pin.
var Kinds = []Kind{Net, IPC, UTS, PID, User}

// cloneFlag is the unshare flag of a namespace kind a bind mount can pin without a process.
func cloneFlag(k Kind) (int, bool) {
	switch k {
	case Net:
		return unix.CLONE_NEWNET, true
	case IPC:
		return unix.CLONE_NEWIPC, true
	case UTS:
		return unix.CLONE_NEWUTS, true
	}
	return 0, false
}

// Manager keeps pins as <dir>/<kind>/<id>.
type Manager struct {
	dir string
}

// New makes the pin dirs under dir (typically <state>/ns). They are private, and made so again
// if an older version left them open: an open pin keeps a pod's namespace alive and tells
// about it, and only root (the OCI runtimes, the CNI plugins, this daemon) needs them, opening
// them before it enters any pod's user namespace.
func New(dir string) (*Manager, error) {
	for _, d := range append([]string{""}, kindDirs()...) {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return nil, err
		}
	}
	return &Manager{dir: dir}, nil
}

func kindDirs() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return out
}

// Path is where the pin of kind for id lives (whether or not it exists).
func (m *Manager) Path(kind Kind, id string) string {
	return filepath.Join(m.dir, string(kind), id)
}

// Request says what Pin makes.
type Request struct {
	ID string
	// Kinds to create: any of Net, IPC, UTS (a PID namespace needs a process; see PinPID).
	Kinds []Kind
	// Hostname is set in the new UTS namespace.
	Hostname string
	// Sysctls are written (key in dotted form) inside the new namespaces, so only namespaced
	// ones make sense; the caller validates them.
	Sysctls map[string]string
	// Inside, if set, runs on the thread while it is in the new namespaces, after the sysctls.
	// A process it starts is born in them.
	Inside func() error
}

// Pin creates the namespaces and their pins, returning their paths by kind. On error nothing
// of it remains.
func (m *Manager) Pin(req Request) (map[Kind]string, error) {
	if err := validID(req.ID); err != nil {
		return nil, err
	}
	flags := 0
	for _, k := range req.Kinds {
		f, ok := cloneFlag(k)
		if !ok {
			return nil, fmt.Errorf("nsmgr: cannot pin %s namespace without a process", k)
		}
		flags |= f
	}
	paths := map[Kind]string{}
	for _, k := range req.Kinds {
		paths[k] = m.Path(k, req.ID)
	}
	// The thread ends with the call instead of going back to other goroutines in foreign
	// namespaces.
	if err := lockedthread.Run(func() error { return pinOnThread(flags, req, paths) }); err != nil {
		for _, p := range paths {
			_ = unpin(p)
		}
		return nil, err
	}
	return paths, nil
}

func pinOnThread(flags int, req Request, paths map[Kind]string) error {
	if flags != 0 {
		if err := unix.Unshare(flags); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
	}
	if flags&unix.CLONE_NEWUTS != 0 && req.Hostname != "" {
		if err := unix.Sethostname([]byte(req.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	if flags&unix.CLONE_NEWNET != 0 {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("loopback up: %w", err)
		}
	}
	for k, v := range req.Sysctls {
		if err := WriteSysctl(k, v); err != nil {
			return err
		}
	}
	for k, p := range paths {
		if err := bindNS("/proc/thread-self/ns/"+string(k), p); err != nil {
			return err
		}
	}
	if req.Inside != nil {
		return req.Inside()
	}
	return nil
}

// PinPID pins the PID namespace of pid (the init a pod's shared PID namespace is held by).
func (m *Manager) PinPID(id string, pid int) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	p := m.Path(PID, id)
	if err := bindNS("/proc/"+strconv.Itoa(pid)+"/ns/pid", p); err != nil {
		_ = unpin(p)
		return "", err
	}
	return p, nil
}

// PinFrom pins the namespaces of kinds that process pid is in (e.g. a helper born in a new user
// namespace with net, ipc and uts namespaces owned by it). On error nothing of it remains.
func (m *Manager) PinFrom(id string, pid int, kinds []Kind) (map[Kind]string, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	paths := map[Kind]string{}
	for _, k := range kinds {
		p := m.Path(k, id)
		paths[k] = p
		if err := bindNS("/proc/"+strconv.Itoa(pid)+"/ns/"+string(k), p); err != nil {
			for _, p := range paths {
				_ = unpin(p)
			}
			return nil, err
		}
	}
	return paths, nil
}

// Setup joins the pinned net, uts and ipc namespaces of paths (those present) on a fresh thread
// and sets the hostname (with uts), brings up loopback (with net) and writes the sysctls there:
// what Pin does for namespaces it creates itself.
func Setup(paths map[Kind]string, hostname string, sysctls map[string]string) error {
	var join []string
	for _, k := range []Kind{Net, IPC, UTS} {
		if p := paths[k]; p != "" {
			join = append(join, p)
		}
	}
	return Do(join, func() error {
		if paths[UTS] != "" && hostname != "" {
			if err := unix.Sethostname([]byte(hostname)); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
		}
		if paths[Net] != "" {
			if err := loopbackUp(); err != nil {
				return fmt.Errorf("loopback up: %w", err)
			}
		}
		for k, v := range sysctls {
			if err := WriteSysctl(k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func bindNS(src, target string) error {
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin %s on %s: %w", src, target, err)
	}
	return nil
}

// Remove unpins every namespace of id. Pins that are gone already are not an error.
func (m *Manager) Remove(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	var errs []error
	for _, k := range Kinds {
		errs = append(errs, unpin(m.Path(k, id)))
	}
	return errors.Join(errs...)
}

func unpin(p string) error {
	// A pin mounted twice (a retried Pin after a crash) needs two unmounts; stop at the first
	// "not a mount point".
	for i := 0; i < 8; i++ {
		err := unix.Unmount(p, unix.MNT_DETACH)
		if err == nil {
			continue
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		return fmt.Errorf("unpin %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// List returns the pins present on disk: ids with the kinds pinned for each. Recovery uses it to
// find pins no record owns; tests use it to prove nothing leaked.
func (m *Manager) List() (map[string][]Kind, error) {
	out := map[string][]Kind{}
	for _, k := range Kinds {
		ents, err := os.ReadDir(filepath.Join(m.dir, string(k)))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			out[e.Name()] = append(out[e.Name()], k)
		}
	}
	return out, nil
}

// nsfsMagic is NSFS_MAGIC: the filesystem type of a namespace file.
const nsfsMagic = 0x6e736673

// IsPinned reports whether path is a live namespace pin (a bind mount of a namespace file).
func IsPinned(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == nsfsMagic
}

// Do runs fn on a fresh OS thread that has joined the namespaces at paths (pins or
// /proc/<pid>/ns/* files). The thread dies afterwards, so nothing else ever runs in them.
func Do(paths []string, fn func() error) error {
	return lockedthread.Run(func() error {
		for _, p := range paths {
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			err = unix.Setns(fd, 0)
			unix.Close(fd)
			if err != nil {
				return fmt.Errorf("setns %s: %w", p, err)
			}
		}
		return fn()
	})
}

// WriteSysctl writes /proc/sys for key ("net.ipv4.ip_forward"; a '/' inside a component stands
// for a literal dot, as in "net.ipv4.conf.eth0/100.rp_filter") in the calling thread's namespaces.
func WriteSysctl(key, value string) error {
	p, err := SysctlPath(key)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return &SysctlError{Key: key, Value: value, Err: err}
	}
	defer f.Close()
	if _, err := f.WriteString(value); err != nil {
		return &SysctlError{Key: key, Value: value, Err: err}
	}
	return nil
}

// SysctlError is a sysctl the kernel refused: no such key in these namespaces, a value out of
// range, or a key that is read-only outside the host's namespaces.
type SysctlError struct {
	Key, Value string
	Err        error
}

func (e *SysctlError) Error() string { return fmt.Sprintf("sysctl %s=%q: %v", e.Key, e.Value, e.Err) }
func (e *SysctlError) Unwrap() error { return e.Err }

// SysctlPath maps a dotted key to its /proc/sys file, refusing keys that could leave /proc/sys.
func SysctlPath(key string) (string, error) {
	parts := strings.Split(key, ".")
	for i, c := range parts {
		c = strings.ReplaceAll(c, "/", ".")
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "\x00\n") {
			return "", fmt.Errorf("sysctl %q: bad name", key)
		}
		parts[i] = c
	}
	return filepath.Join(append([]string{"/proc/sys"}, parts...)...), nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func validID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return fmt.Errorf("nsmgr: bad id %q", id)
	}
	return nil
}
