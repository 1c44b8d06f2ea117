// Package testutil holds what the project's root-and-real-binaries tests share: prerequisite checks
// that fail with the command that installs what is missing, a busybox rootfs, and leak checks.
package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// packageOf names the Debian package that provides each binary tests rely on.
var packageOf = map[string]string{
	"runc":          "runc",
	"crun":          "crun",
	"runsc":         "runsc",
	"conmon":        "conmon",
	"catatonit":     "catatonit",
	"busybox":       "busybox-static",
	"iptables":      "iptables",
	"iptables-save": "iptables",
	"ip":            "iproute2",
	"nsenter":       "util-linux",
	"unshare":       "util-linux",
	"containerd":    "containerd",
	"ipcmk":         "util-linux",
	"ipcs":          "util-linux",
	"pgrep":         "procps",
}

// InstallHint is what a newcomer runs to get every prerequisite.
const InstallHint = "run `sudo hack/install.sh` from the repository root"

// Require fails the test (never skips it) when it does not run as root or a binary is missing,
// saying what installs it. Binaries are looked up in PATH and in the CNI plugin folder.
func Require(t testing.TB, bins ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (it mounts, makes namespaces and cgroups); run it as root: sudo go test ./...")
	}
	var missing, pkgs []string
	for _, b := range bins {
		if LookPath(b) != "" {
			continue
		}
		missing = append(missing, b)
		if p, ok := packageOf[b]; ok {
			pkgs = append(pkgs, p)
		} else if strings.HasPrefix(b, "cni:") {
			pkgs = append(pkgs, "containernetworking-plugins")
		}
	}
	if len(missing) > 0 {
		t.Fatalf("missing prerequisites %v: install with `apt-get install -y %s` or %s",
			missing, strings.Join(pkgs, " "), InstallHint)
	}
}

// CNIBinDirs are searched for plugins, Debian's folder first.
var CNIBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// LookPath finds a binary; the name "cni:PLUGIN" looks in CNIBinDirs. It returns "" when absent.
func LookPath(name string) string {
	if p, ok := strings.CutPrefix(name, "cni:"); ok {
		for _, d := range CNIBinDirs {
			if st, err := os.Stat(d + "/" + p); err == nil && !st.IsDir() {
				return d + "/" + p
			}
		}
		return ""
	}
	p, err := exec.LookPath(name)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
			if st, err := os.Stat(d + "/" + name); err == nil && !st.IsDir() {
				return d + "/" + name
			}
		}
		return ""
	}
	return p
}
