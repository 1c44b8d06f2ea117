package engine

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// The fuzz targets feed the CRI validators a request decoded from arbitrary protobuf bytes, with
// the fields that become names, paths and sysctls set from fuzzed strings so they are reached
// often. The validators must never panic, must refuse with InvalidArgument only, and whatever
// they accept must be safe to turn into file names, paths and /proc/sys writes. Seeds live in
// testdata/fuzz/<target>/.

func FuzzValidateSandboxConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte, name, namespace, uid, hostname, logDir, cgroupParent, sysctlKey, sysctlValue string) {
		cfg := &runtimeapi.PodSandboxConfig{}
		if proto.Unmarshal(raw, cfg) != nil {
			cfg = &runtimeapi.PodSandboxConfig{}
		}
		cfg.Metadata = &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid}
		cfg.Hostname, cfg.LogDirectory = hostname, logDir
		if cfg.Linux == nil {
			cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{}
		}
		cfg.Linux.CgroupParent = cgroupParent
		if sysctlKey != "" {
			if cfg.Linux.Sysctls == nil {
				cfg.Linux.Sysctls = map[string]string{}
			}
			cfg.Linux.Sysctls[sysctlKey] = sysctlValue
		}
		err := validateSandboxConfig(cfg)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("refusal is not InvalidArgument: %v", err)
			}
			return
		}
		checkAcceptedSandbox(t, cfg)
	})
}

// checkAcceptedSandbox fails if an accepted config holds what could escape a dir or the pod.
func checkAcceptedSandbox(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
	md := cfg.GetMetadata()
	for _, v := range []string{md.Name, md.Namespace, md.Uid} {
		if !safeFileName(v) {
			t.Fatalf("accepted metadata %q, not usable as a file name", v)
		}
	}
	if n := sandboxName(md); filepath.Base(n) != n || strings.Contains(n, "..") {
		t.Fatalf("accepted metadata makes the reserved name %q a path", n)
	}
	if h := cfg.Hostname; strings.ContainsFunc(h, func(c rune) bool { return c <= ' ' || c == '/' || c > 0x7e }) {
		t.Fatalf("accepted hostname %q", h)
	}
	if d := cfg.LogDirectory; d != "" && (!path.IsAbs(d) || hasDotDot(d) || strings.ContainsAny(d, "\x00\n")) {
		t.Fatalf("accepted log directory %q", d)
	}
	if p := cfg.GetLinux().GetCgroupParent(); p != "" && (path.Clean(p) != p || !path.IsAbs(p) || hasDotDot(p)) {
		t.Fatalf("accepted cgroup parent %q", p)
	}
	for k, v := range cfg.GetLinux().GetSysctls() {
		file := path.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))
		ok := strings.HasPrefix(file, "/proc/sys/net/") || strings.HasPrefix(file, "/proc/sys/kernel/") || strings.HasPrefix(file, "/proc/sys/fs/mqueue/")
		if !ok || hasDotDot(strings.ReplaceAll(k, ".", "/")) || strings.ContainsAny(k+v, "=\n\x00") {
			t.Fatalf("accepted sysctl %q=%q (writes %s)", k, v, file)
		}
	}
	for _, w := range append(append([]string(nil), cfg.GetDnsConfig().GetSearches()...), cfg.GetDnsConfig().GetOptions()...) {
		if w == "" || strings.ContainsFunc(w, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
			t.Fatalf("accepted DNS word %q", w)
		}
	}
}

func FuzzValidateContainerConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte, name, image, logPath, workingDir, envKey string) {
		cfg := &runtimeapi.ContainerConfig{}
		if proto.Unmarshal(raw, cfg) != nil {
			cfg = &runtimeapi.ContainerConfig{}
		}
		cfg.Metadata = &runtimeapi.ContainerMetadata{Name: name}
		cfg.Image = &runtimeapi.ImageSpec{Image: image}
		cfg.LogPath, cfg.WorkingDir = logPath, workingDir
		if envKey != "" {
			cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: envKey, Value: []byte("v")})
		}
		err := validateContainerConfig(cfg)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("refusal is not InvalidArgument: %v", err)
			}
			return
		}
		checkAcceptedContainer(t, cfg)
	})
}

// checkAcceptedContainer fails if an accepted config holds what could escape a dir.
func checkAcceptedContainer(t *testing.T, cfg *runtimeapi.ContainerConfig) {
	n := cfg.GetMetadata().GetName()
	if n == "" || n == "." || strings.ContainsAny(n, "/\\\x00") || strings.Contains(n, "..") {
		t.Fatalf("accepted container name %q", n)
	}
	if lp := cfg.GetLogPath(); lp != "" {
		const dir = "/var/log/pods/ns_pod_uid"
		if j := filepath.Join(dir, lp); !strings.HasPrefix(j, dir+"/") {
			t.Fatalf("accepted log path %q, which leaves the pod's log directory (%s)", lp, j)
		}
	}
	if wd := cfg.GetWorkingDir(); wd != "" && !filepath.IsAbs(wd) {
		t.Fatalf("accepted relative working dir %q", wd)
	}
	for _, e := range cfg.GetEnvs() {
		if e.GetKey() == "" || strings.ContainsAny(e.GetKey(), "=\x00") || strings.ContainsRune(string(e.GetValue()), 0) {
			t.Fatalf("accepted env %q", e.GetKey())
		}
	}
	for _, a := range append(append([]string(nil), cfg.GetCommand()...), cfg.GetArgs()...) {
		if strings.ContainsRune(a, 0) {
			t.Fatalf("accepted NUL in command %q", a)
		}
	}
}

func safeFileName(v string) bool {
	return v != "" && v != "." && !strings.ContainsAny(v, "/\\\x00") && !strings.Contains(v, "..") &&
		!strings.ContainsFunc(v, func(c rune) bool { return c < 0x21 || c == 0x7f })
}
