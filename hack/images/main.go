// Command images builds the stand-ins of the upstream images that critest, the upstream kubelet and
// the demos pull, and serves them from a registry on a loopback port. Nothing upstream is reachable
// here: a runtime started with registry mirrors (registry.k8s.io, k8s.gcr.io, gcr.io, public.ecr.aws,
// docker.io → http://ADDR) pulls them under their upstream names.
//
//	go run ./hack/images serve --addr 127.0.0.1:5000 [--ready-file F]  serve until SIGTERM; F gets ADDR once ready
//	    [--busybox BIN --agnhost BIN --agnhost-certs DIR]              also the conformance suite's images (hack/conformance.sh)
//	    [--coredns BIN]                                                also CoreDNS's image (hack/cluster.sh)
//	    [--host-only]                                                  ADDR may be a host-only bridge's private address
//	go run ./hack/images list                                          the names served
//	go run ./hack/images registries                                    the registry hosts to mirror
//	go run ./hack/images demo-tar FILE [NAME]                          a docker-archive of a busybox image
//
// Run it from the repository root (it builds two small static helpers with `go build`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodelet/nodelet/test/harness/testimage"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "list", "registries":
		var images map[string]v1.Image
		if images, err = build(); err == nil {
			list := slices.Sorted(mapKeys(images))
			if os.Args[1] == "registries" {
				list = registries(images)
			}
			for _, n := range list {
				fmt.Println(n)
			}
		}
	case "demo-tar":
		err = demoTar(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: images serve --addr HOST:PORT [--ready-file FILE] | list | registries | demo-tar FILE [NAME]")
	os.Exit(2)
}

func build() (map[string]v1.Image, error) {
	dir, err := os.MkdirTemp("", "nodelet-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	h, err := buildHelpers(dir)
	if err != nil {
		return nil, err
	}
	return catalog(h)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	ready := fs.String("ready-file", "", "file to write the listening HOST:PORT into once every image is pushed")
	agnhost := fs.String("agnhost", "", "an agnhost binary: also serve the Kubernetes conformance suite's images")
	agnhostCerts := fs.String("agnhost-certs", "", "the folder of agnhost's porter/localhost.crt and .key (with --agnhost)")
	busybox := fs.String("busybox", "", "the upstream static busybox the conformance images are made of (with --agnhost)")
	coredns := fs.String("coredns", "", "a CoreDNS binary: also serve registry.k8s.io/coredns/coredns")
	hostOnly := fs.Bool("host-only", false, "--addr may be a private address of a bridge only this host's network namespaces are on "+
		"(hack/cluster.sh's nodes pull from it); never one other machines reach")
	_ = fs.Parse(args)
	if (*agnhost == "") != (*agnhostCerts == "") || (*agnhost == "") != (*busybox == "") {
		return fmt.Errorf("--busybox, --agnhost and --agnhost-certs go together")
	}

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !(ip.IsLoopback() || (*hostOnly && ip.IsPrivate())) {
		return fmt.Errorf("--addr %s: only loopback addresses (or, with --host-only, a host-only bridge's private one)", *addr)
	}
	images, err := build()
	if err != nil {
		return err
	}
	if *agnhost != "" {
		extra, err := conformanceImages(*busybox, *agnhost, *agnhostCerts)
		if err != nil {
			return err
		}
		for n, img := range extra {
			if _, ok := images[n]; ok {
				return fmt.Errorf("%s is in the catalog twice", n)
			}
			images[n] = img
		}
	}
	if *coredns != "" {
		img, err := corednsImage(*coredns)
		if err != nil {
			return err
		}
		images[corednsName] = img
	}
	paths, err := byRepoPath(images)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: testimage.NewRegistry(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	listen := ln.Addr().String()
	if err := testimage.Push(listen, paths); err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "images: %d images (%d names) on http://%s for %v\n", len(paths), len(images), listen, registries(images))
	if *ready != "" {
		tmp := filepath.Join(filepath.Dir(*ready), "."+filepath.Base(*ready)+".tmp")
		if err := os.WriteFile(tmp, []byte(listen+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *ready); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// demoTar writes a docker-archive (`docker save` format, which `nodelet image load` style
// commands and `ctr images import` read) of a busybox image for the README's offline demo.
func demoTar(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		usage()
	}
	ref := "docker.io/library/busybox:latest"
	if len(args) == 2 {
		ref = args[1]
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	img, err := testimage.Busybox(testimage.WithFile("/etc/motd", "nodelet demo image (busybox)\n", 0o644))
	if err != nil {
		return err
	}
	return tarball.WriteToFile(args[0], tag, img)
}
