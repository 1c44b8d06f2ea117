package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// The RuntimeDefault profile allows every system call except those that reach outside the
// container: kernel modules and keyrings, clocks, reboot, swap, accounting, tracing of other
// processes, namespace and mount manipulation. It is a deny list rather than containerd's allow
// list, so a new kernel's new calls keep working; the capabilities the container holds re-allow
// the calls they govern, as the upstream default profiles do. io_uring is denied whatever the
// capabilities, as containerd's and Docker's profiles do since 2023: its rings do I/O outside
// the filter's sight and it has been the kernel's most exploited interface for escapes.
var (
	alwaysDenied = []string{
		"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
		"finit_module", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
		"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "move_pages",
		"name_to_handle_at", "nfsservctl", "open_by_handle_at", "perf_event_open", "pivot_root",
		"process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl", "reboot",
		"request_key", "set_mempolicy", "settimeofday", "stime", "swapoff", "swapon", "sysfs",
		"_sysctl", "uselib", "userfaultfd", "ustat", "vm86", "vm86old", "fsopen", "fsconfig",
		"fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
	}
	// deniedUnlessCap: calls a capability the container was given makes legitimate again.
	deniedUnlessCap = map[string][]string{
		"CAP_SYS_ADMIN":  {"mount", "umount", "umount2", "unshare", "setns", "setdomainname", "sethostname", "fanotify_init"},
		"CAP_SYS_PTRACE": {"ptrace", "process_vm_readv", "process_vm_writev", "kcmp"},
		"CAP_SYS_TIME":   {"clock_adjtime", "clock_settime", "settimeofday", "stime"},
		"CAP_SYS_MODULE": {"init_module", "finit_module", "delete_module"},
		"CAP_SYS_BOOT":   {"reboot"},
		"CAP_SYS_PACCT":  {"acct"},
		"CAP_SYS_NICE":   {"get_mempolicy", "mbind", "set_mempolicy", "move_pages"},
	}
)

// DefaultSeccomp is the RuntimeDefault filter for a container given the added capabilities.
func DefaultSeccomp(addedCaps []string) *specs.LinuxSeccomp {
	allowed := map[string]bool{}
	for _, c := range addedCaps {
		n, err := normCap(c)
		if strings.EqualFold(c, "ALL") {
			for _, calls := range deniedUnlessCap {
				for _, s := range calls {
					allowed[s] = true
				}
			}
			continue
		}
		if err != nil {
			continue
		}
		for _, s := range deniedUnlessCap[n] {
			allowed[s] = true
		}
	}
	seen := map[string]bool{}
	var denied []string
	addDenied := func(s string) {
		if !allowed[s] && !seen[s] {
			seen[s] = true
			denied = append(denied, s)
		}
	}
	for _, s := range alwaysDenied {
		addDenied(s)
	}
	for _, calls := range deniedUnlessCap {
		for _, s := range calls {
			addDenied(s)
		}
	}
	errno := uint(1) // EPERM
	rules := []specs.LinuxSyscall{{Names: denied, Action: specs.ActErrno, ErrnoRet: &errno}}
	if !allowed["unshare"] {
		// Without CAP_SYS_ADMIN no new namespaces, user namespaces included (the usual way
		// from a container to kernel attack surface): clone with any CLONE_NEW* flag fails, and
		// clone3, whose flags a filter cannot read, says it does not exist so that libcs fall
		// back to clone.
		for _, flag := range []uint64{0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000} {
			rules = append(rules, specs.LinuxSyscall{
				Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &errno,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
			})
		}
		enosys := uint(38)
		rules = append(rules, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys})
	}
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64, specs.ArchARM},
		Syscalls:      rules,
	}
}

// maxSeccompProfileSize bounds a Localhost profile: real ones are tens of KiB (containerd's
// default is about 20), so a larger file is a mistake or an attack on the daemon's memory.
const maxSeccompProfileSize = 1 << 20

// localhostSeccomp loads a Localhost profile, the OCI seccomp JSON the kubelet resolves under its
// root dir (<root-dir>/seccomp/<localhostProfile>). Only an absolute path is taken: a relative one
// would be relative to wherever the daemon runs. The file must be a regular file of bounded size;
// a missing one is reported in containerd's words, which users and tools already know.
func localhostSeccomp(ref string) (*specs.LinuxSeccomp, error) {
	if !filepath.IsAbs(ref) {
		return nil, fmt.Errorf("seccomp localhost profile %q must be an absolute path: %w", ref, errdefs.ErrInvalidArgument)
	}
	data, err := readHostFile(ref, maxSeccompProfileSize)
	if err != nil {
		// Missing or unreadable, the host lacks what the request needs; not a profile at all,
		// the request named the wrong thing.
		kind := errdefs.ErrFailedPrecondition
		if errors.Is(err, errNotRegular) || errors.Is(err, errTooLarge) {
			kind = errdefs.ErrInvalidArgument
		}
		return nil, fmt.Errorf("cannot load seccomp profile %q: %v: %w", ref, err, kind)
	}
	var out specs.LinuxSeccomp
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding seccomp profile failed %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
	}
	if out.DefaultAction == "" {
		return nil, fmt.Errorf("decoding seccomp profile failed %q: no defaultAction: %w", ref, errdefs.ErrInvalidArgument)
	}
	return &out, nil
}
