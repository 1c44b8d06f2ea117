package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/harness/testimage"
)

// The stand-ins of the upstream images critest v1.36.0 (pkg/validate, pkg/benchmark,
// pkg/framework), the kubelet and the demos pull. Each is named as upstream, so a runtime whose
// registry mirrors send registry.k8s.io, k8s.gcr.io, gcr.io, public.ecr.aws and docker.io to the
// loopback registry pulls them unchanged. Names that list the same image share one digest, as the
// specs on multiple tags and registries expect.
//
// Not served: gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2…, whose digest is
// that of an upstream image no local build can reproduce; its spec fails offline.

// nginxScript stands in for nginx as critest sees it: a process whose name is nginx, its pid in
// /var/run/nginx.pid, "master process" in its command line (the title nginx gives its master),
// and an HTTP server answering 200 on $NGINX_PORT (80 by default). The script re-executes itself
// once to put that title into its arguments; its comm stays "nginx" because the kernel names a
// script's process after the script.
const nginxScript = `#!/bin/sh
case "$1" in
"master process"*) ;;
*) exec /usr/sbin/nginx "master process nginx $*" ;;
esac
echo $$ >/var/run/nginx.pid
httpd -f -p "${NGINX_PORT:-80}" -h /usr/share/nginx/html &
trap 'kill $! 2>/dev/null; exit 0' TERM INT QUIT
wait
`

// httpdScript stands in for the e2e httpd image: it logs a line naming httpd (critest looks for
// "httpd" in the container log) and serves /usr/local/apache2/htdocs on port 80.
const httpdScript = `#!/bin/sh
echo "httpd: nodelet stand-in serving /usr/local/apache2/htdocs on port 80"
exec httpd -f -v -p 80 -h /usr/local/apache2/htdocs
`

// helpers are the static programs some stand-ins hold, built once per run.
type helpers struct{ pause, nnp string }

func buildHelpers(dir string) (helpers, error) {
	h := helpers{pause: filepath.Join(dir, "pause"), nnp: filepath.Join(dir, "nnp")}
	for out, pkg := range map[string]string{h.pause: "./hack/images/pause", h.nnp: "./hack/images/nnp"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = moduleRoot()
		if b, err := cmd.CombinedOutput(); err != nil {
			return h, fmt.Errorf("go build %s: %v: %s", pkg, err, b)
		}
	}
	return h, nil
}

// moduleRoot is the repository root: this program runs from there or from hack/images.
func moduleRoot() string {
	for _, d := range []string{".", "../..", "../../.."} {
		if _, err := os.Stat(filepath.Join(d, "hack/images/pause/main.go")); err == nil {
			return d
		}
	}
	return "."
}

func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// catalog builds every stand-in, keyed by its full upstream name.
func catalog(h helpers) (map[string]v1.Image, error) {
	type build struct {
		names []string
		opts  []testimage.Option
	}
	ecr := "public.ecr.aws/docker/library/busybox:"
	cri := "gcr.io/k8s-staging-cri-tools/"
	e2e := "registry.k8s.io/e2e-test-images/"
	index := "<html><body><h1>Welcome to nginx!</h1><p>nodelet stand-in</p></body></html>\n"
	hostTool := func(name, at string) testimage.Option {
		p, err := exec.LookPath(name)
		if err != nil {
			p = "/usr/bin/" + name // testimage reports it missing with its path
		}
		return testimage.WithHostBinary(p, at)
	}
	nginx := func(port string) []testimage.Option {
		return []testimage.Option{
			testimage.WithDynamicBusybox(),
			testimage.WithFile("/usr/sbin/nginx", nginxScript, 0o755),
			testimage.WithFile("/usr/share/nginx/html/index.html", index, 0o644),
			testimage.WithEnv("NGINX_PORT=" + port),
			testimage.WithExposedPorts(port + "/tcp"),
			testimage.WithStopSignal("SIGQUIT"),
			testimage.WithCmd("nginx", "-g", "daemon off;"),
		}
	}
	marker := func(name string) testimage.Option { return testimage.WithFile("/"+name, name+"\n", 0o644) }
	user := func(u string) []testimage.Option {
		return []testimage.Option{
			testimage.WithUsers(testimage.User{Name: "www-data", UID: 33, GID: 33, Home: "/var/www"}),
			testimage.WithUser(u),
		}
	}

	builds := []build{
		// The default container image of critest and of the kubelet scripts: a busybox whose
		// applets are processes, with pgrep and ipcs as the upstream image has them.
		{[]string{e2e + "busybox:1.29-2", e2e + "busybox:1.29-4", "docker.io/library/busybox:1.29"},
			[]testimage.Option{testimage.WithDynamicBusybox(),
				hostTool("pgrep", "/usr/bin/pgrep"), hostTool("ipcs", "/usr/bin/ipcs")}},
		{[]string{e2e + "nginx:1.14-2", e2e + "nginx:1.14-4", e2e + "nginx:1.15-4"}, nginx("80")},
		{[]string{cri + "hostnet-nginx-" + runtime.GOARCH + ":latest"}, nginx("12003")},
		{[]string{e2e + "httpd:2.4.39-4", e2e + "httpd:2.4.38-4"}, []testimage.Option{
			testimage.WithDynamicBusybox(),
			testimage.WithFile("/usr/local/bin/httpd-foreground", httpdScript, 0o755),
			testimage.WithFile("/usr/local/apache2/htdocs/index.html", "<html><body><h1>It works!</h1></body></html>\n", 0o644),
			testimage.WithExposedPorts("80/tcp"),
			testimage.WithCmd("httpd-foreground"),
		}},
		{[]string{e2e + "nonewprivs:1.3"}, []testimage.Option{
			testimage.WithFile("/usr/local/bin/nnp", read(h.nnp), 0o755|os.ModeSetuid),
			testimage.WithCmd("/usr/local/bin/nnp"),
		}},
		// The sandbox image of containerd and of the kubelet's defaults, under each tag in use.
		{[]string{"registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9",
			"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10.1"}, []testimage.Option{
			testimage.WithoutBusybox(),
			testimage.WithFile("/pause", read(h.pause), 0o755),
			testimage.WithEntrypoint("/pause"),
			testimage.WithUser("65535:65535"),
		}},
		// Image manager specs: distinct images, one image under several tags.
		{[]string{cri + "test-image-latest:latest"}, []testimage.Option{marker("test-image-latest")}},
		{[]string{cri + "test-image-tag:test", cri + "test-image-tag:all"}, []testimage.Option{marker("test-image-tag")}},
		{[]string{cri + "test-image-1:latest"}, []testimage.Option{marker("test-image-1")}},
		{[]string{cri + "test-image-2:latest"}, []testimage.Option{marker("test-image-2")}},
		{[]string{cri + "test-image-3:latest"}, []testimage.Option{marker("test-image-3")}},
		{[]string{cri + "test-image-tags:1", cri + "test-image-tags:2", cri + "test-image-tags:3"},
			[]testimage.Option{marker("test-image-tags")}},
		// Image users, as cri-tools' images/build sets them.
		{[]string{cri + "test-image-user-uid:latest"}, user("1002")},
		{[]string{cri + "test-image-user-username:latest"}, user("www-data")},
		{[]string{cri + "test-image-user-uid-group:latest"}, user("1003:1004")},
		{[]string{cri + "test-image-user-username-group:latest"}, user("www-data:1004")},
		{[]string{cri + "test-image-predefined-group:latest"}, []testimage.Option{
			testimage.WithDynamicBusybox(),
			testimage.WithUsers(testimage.User{Name: "default-user", UID: 1000, GID: 1000, Home: "/home/default-user"}),
			testimage.WithGroups(testimage.Group{Name: "group-defined-in-image", GID: 50000, Members: []string{"default-user"}}),
			testimage.WithUser("1000"),
		}},
		// critest -benchmark's image listing and pulling set, and the demos' busybox.
		{[]string{ecr + "1", ecr + "latest"}, []testimage.Option{marker("busybox-1")}},
		{[]string{ecr + "1-glibc", ecr + "1.35.0-glibc"}, []testimage.Option{testimage.WithDynamicBusybox()}},
		{[]string{ecr + "1-uclibc"}, []testimage.Option{marker("busybox-1-uclibc")}},
		{[]string{ecr + "1-musl"}, []testimage.Option{marker("busybox-1-musl")}},
		{[]string{"docker.io/library/busybox:latest", "docker.io/library/busybox:1.36"}, nil},
	}

	out := map[string]v1.Image{}
	for _, b := range builds {
		img, err := testimage.Busybox(b.opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.names[0], err)
		}
		for _, n := range b.names {
			out[n] = img
		}
	}
	return out, nil
}

// byRepoPath keys images by the path a mirror serves them under (the name without its registry),
// refusing two different images at one path.
func byRepoPath(images map[string]v1.Image) (map[string]v1.Image, error) {
	out := map[string]v1.Image{}
	from := map[string]string{}
	for _, n := range slices.Sorted(mapKeys(images)) {
		p, err := testimage.RepoPath(n)
		if err != nil {
			return nil, err
		}
		if prev, ok := out[p]; ok {
			d1, _ := prev.Digest()
			d2, _ := images[n].Digest()
			if d1 != d2 {
				return nil, fmt.Errorf("%s and %s are different images at one path %s", from[p], n, p)
			}
			continue
		}
		out[p], from[p] = images[n], n
	}
	return out, nil
}

func mapKeys(m map[string]v1.Image) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// registries are the hosts the catalog's names use: a runtime mirrors each to the loopback registry.
func registries(images map[string]v1.Image) []string {
	var hosts []string
	for n := range images {
		h, _, _ := strings.Cut(n, "/")
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// conformanceImages are the stand-ins of the e2e images the Kubernetes node and storage
// conformance specs run (test/utils/image/manifest.go of the suite's version), on the upstream
// busybox the suite's images are made of (busybox, built from source by hack/kube/busybox.sh:
// Debian's ash drops environment names that are not identifiers, such as the envFrom specs'
// data-1, which upstream's passes on). agnhost is the real program, built from the suite's own
// module by hack/kube/build.sh, in an image laid out as upstream's (curl beside it, the porter's
// localhost certificate, a user and a group defined in the image, bash as ash); certDir holds
// localhost.crt/.key.
func conformanceImages(busybox, agnhost, certDir string) (map[string]v1.Image, error) {
	e2e := "registry.k8s.io/e2e-test-images/"
	curl, err := exec.LookPath("curl")
	if err != nil {
		return nil, fmt.Errorf("curl is missing (the agnhost image carries it): apt-get install -y curl")
	}
	agn, err := os.ReadFile(agnhost)
	if err != nil {
		return nil, err
	}
	// Upstream's images have every applet in /bin.
	base := []testimage.Option{testimage.WithBusyboxBinary(busybox), testimage.WithAppletsInBin()}
	opts := append(base,
		testimage.WithFile("/agnhost", string(agn), 0o755),
		testimage.WithSymlink("/agnhost-2", "agnhost"),
		testimage.WithHostBinary(curl, "/usr/bin/curl"),
		// Upstream's has bash, which probe specs run their SIGTERM-trapping scripts with; busybox
		// has none, and its ash runs those scripts alike.
		testimage.WithFile("/bin/bash", "#!/bin/sh\nexec /bin/sh \"$@\"\n", 0o755),
		testimage.WithDir("/uploads", 0o755, 0, 0),
		testimage.WithUsers(testimage.User{Name: "user-defined-in-image", UID: 1000, GID: 1000, Home: "/home/user-defined-in-image"}),
		testimage.WithGroups(testimage.Group{Name: "user-defined-in-image", GID: 1000},
			testimage.Group{Name: "group-defined-in-image", GID: 50000, Members: []string{"user-defined-in-image"}}),
		testimage.WithExposedPorts("80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"),
		testimage.WithEntrypoint("/agnhost"),
		testimage.WithCmd("pause"),
	)
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		b, err := os.ReadFile(filepath.Join(certDir, f))
		if err != nil {
			return nil, err
		}
		opts = append(opts, testimage.WithFile("/"+f, string(b), 0o644))
	}
	agnImg, err := testimage.Busybox(opts...)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	// busybox is the plain image; nonroot is busybox with USER 1234.
	bb, err := testimage.Busybox(base...)
	if err != nil {
		return nil, err
	}
	nonroot, err := testimage.Busybox(append(base, testimage.WithUser("1234"))...)
	if err != nil {
		return nil, err
	}
	return map[string]v1.Image{
		e2e + "agnhost:2.56":     agnImg,
		e2e + "busybox:1.37.0-1": bb,
		e2e + "nonroot:1.4":      nonroot,
	}, nil
}

// corednsName is the CoreDNS image kubeadm v1.34 deploys.
const corednsName = "registry.k8s.io/coredns/coredns:v1.12.1"

// corednsImage is CoreDNS's image as upstream lays it out: the binary alone, its entrypoint
// (hack/kube/build.sh coredns builds it, with the plugins a cluster's DNS uses).
func corednsImage(bin string) (v1.Image, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return testimage.Busybox(testimage.WithoutBusybox(), testimage.WithFile("/coredns", string(b), 0o755),
		testimage.WithEntrypoint("/coredns"), testimage.WithExposedPorts("53/tcp", "53/udp"))
}
