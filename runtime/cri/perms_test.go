package cri_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// suidPath is a setuid-root copy of busybox in the test image: through the host's view of a
// rootfs or a layer it would give any host user euid 0.
const suidPath = "bin/busybox-suid"

// nobody is the unprivileged host user the checks run as.
const nobody = 65534

// TestOtherUsersCannotReachPods runs pods on the real image store, one of them in its own user
// namespace, with parent dirs everyone may list (as /var/lib is), and then, as uid 65534, tries
// to list, read, write and execute everything under --root, --state and the pod log dir: the
// rootfs, the setuid file through the rootfs and the layers, bundles, records, sockets, exit
// files, pins, logs, and the pod's /dev/shm. The shm mount must be nosuid, nodev and noexec.
func TestOtherUsersCannotReachPods(t *testing.T) {
	testutil.Require(t, "busybox")
	bb, err := os.ReadFile(testutil.LookPath("busybox"))
	if err != nil {
		t.Fatal(err)
	}
	img := testimage.MustBusybox(testimage.WithFile("/"+suidPath, string(bb), 0o755|os.ModeSetuid))
	host := testimage.Serve(t, map[string]v1.Image{"perms/suid:1": img})
	ref := host + "/perms/suid:1"

	tests := []struct {
		name, handler string
		userns        bool
	}{
		{name: "runc", handler: "runc"},
		{name: "runc userns", handler: "runc", userns: true},
		{name: "crun userns", handler: "crun", userns: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var images *imagestore.Store
			e := runtimetest.Start(t, runtimetest.WithConfig(func(c *engine.Config) {
				st, err := imagestore.Open(filepath.Join(c.Root, "images"))
				if err != nil {
					t.Fatal(err)
				}
				images, c.Images = st, st
			}))
			// The worst case for the runtime: every dir above its own is listable by everyone.
			openUp(t, e.Dir)
			if _, err := images.Pull(e.Ctx(), ref, imagestore.PullOptions{}); err != nil {
				t.Fatal(err)
			}

			pod := e.PodWithLogs("perms")
			if tt.userns {
				pod = usernsPod(e, "perms", 300000)
			}
			sb := e.RunPod(pod, tt.handler)
			cfg := runtimetest.ContainerConfig("c", "sh", "-c", "echo started; exec sleep 1000")
			cfg.Image = &runtimeapi.ImageSpec{Image: ref}
			cfg.Tty = true // conmon then makes the attach socket and the ctl and winsz fifos
			id := e.RunContainer(sb, pod, cfg)
			// The rootfs itself must keep setuid working for the container's own users.
			resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"stat", "-c", "%a", "/" + suidPath}, Timeout: 60})
			if err != nil || strings.TrimSpace(string(resp.GetStdout())) != "4755" {
				t.Fatalf("setuid file in the container: %v %q %q", err, resp.GetStdout(), resp.GetStderr())
			}

			logDir := filepath.Join(e.Dir, "logs")
			e.WaitLog(filepath.Join(pod.LogDirectory, cfg.LogPath), "started")
			var probes []probe
			for _, top := range []string{e.Config.Root, e.Config.State, logDir} {
				probes = append(probes, walkProbes(t, top)...)
			}
			rootfs := containerRootfs(t, e, id)
			probes = append(probes,
				probe{"dir", rootfs},
				probe{"exec", filepath.Join(rootfs, suidPath)},
				probe{"read", filepath.Join(rootfs, "etc", "passwd")})
			for _, d := range layerDirs(t, images.Root()) {
				probes = append(probes, probe{"exec", filepath.Join(d, suidPath)})
			}
			shm := filepath.Join(e.Config.State, "pods", sb, "shm")
			probes = append(probes, probe{"dir", shm})
			if bad := runAsNobody(t, probes); len(bad) > 0 {
				t.Errorf("uid %d can reach what belongs to pods:\n%s", nobody, strings.Join(bad, "\n"))
			}
			assertShmFlags(t, shm)
		})
	}
}

// openUp makes dir and its parents up to the temp dir listable and searchable by everyone.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// probe is one thing uid 65534 must not be able to do: list or create in a dir ("dir"), read a
// file ("read"), look a path up at all ("hidden"), or execute a file ("exec").
type probe struct{ kind, path string }

// walkProbes lists what lies under top, as root sees it. Mounted trees (rootfs, shm) and
// unpacked layers are probed at their top and through the paths named by the test, not file
// by file.
func walkProbes(t *testing.T, top string) []probe {
	t.Helper()
	var out []probe
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out = append(out, probe{"dir", p})
			if n := d.Name(); n == "merged" || n == "diff" || n == "shm" || n == "upper" {
				return filepath.SkipDir
			}
		case filepath.Dir(p) == filepath.Join(top, "images") && strings.HasSuffix(d.Name(), "lock"):
			// The image store's lock files belong to no pod; they sit in its searchable root.
			out = append(out, probe{"read", p})
		default:
			// Files, links, sockets, fifos and namespace pins all sit in private dirs, so
			// that not even their names and owners can be looked up.
			out = append(out, probe{"hidden", p})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// containerRootfs is the merged dir of the container's overlay in the image store.
func containerRootfs(t *testing.T, e *runtimetest.Env, id string) string {
	t.Helper()
	p := filepath.Join(e.Config.Root, "images", "rootfs", id, "merged")
	if _, err := os.Stat(filepath.Join(p, suidPath)); err != nil {
		t.Fatal(err)
	}
	return p
}

// layerDirs are the unpacked layers of the store, as paths and through their short links.
func layerDirs(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, glob := range []string{"layers/*/diff", "l/*"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range m {
			if _, err := os.Stat(filepath.Join(d, suidPath)); err == nil {
				out = append(out, d)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no layer under %s holds %s", root, suidPath)
	}
	return out
}

// probeScript reads "kind path" lines and prints each thing it managed to do.
const probeScript = `
while read -r kind p; do
	case $kind in
	dir)
		ls -a "$p" >/dev/null 2>&1 && echo "listed $p"
		( : >"$p/.nobody" ) 2>/dev/null && echo "created a file in $p"
		;;
	read)
		cat "$p" >/dev/null 2>&1 && echo "read $p"
		;;
	hidden)
		[ -e "$p" ] || [ -L "$p" ] && echo "looked up $p"
		;;
	exec)
		"$p" true >/dev/null 2>&1 && echo "executed $p"
		;;
	esac
done
true
`

// runAsNobody runs the probes in one shell as uid 65534 and returns what succeeded.
func runAsNobody(t *testing.T, probes []probe) []string {
	t.Helper()
	var in bytes.Buffer
	for _, p := range probes {
		in.WriteString(p.kind + " " + p.path + "\n")
	}
	cmd := exec.Command(testutil.LookPath("busybox"), "sh", "-c", probeScript)
	cmd.Stdin = &in
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe as uid %d: %v\n%s", nobody, err, out)
	}
	var bad []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		bad = append(bad, sc.Text())
	}
	return bad
}

// assertShmFlags checks the pod's /dev/shm can carry no setuid file, device or program.
func assertShmFlags(t *testing.T, shm string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[4] != shm {
			continue
		}
		opts := strings.Split(fields[5], ",")
		for _, want := range []string{"nosuid", "nodev", "noexec"} {
			if !slices.Contains(opts, want) {
				t.Errorf("shm %s mounted %s: no %s", shm, fields[5], want)
			}
		}
		return
	}
	t.Errorf("shm %s is not mounted", shm)
}
