package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// critestImages are the names critest v1.36.0 pulls (pkg/validate, pkg/benchmark), except the
// digest-pinned one no local build can match.
var critestImages = []string{
	"registry.k8s.io/e2e-test-images/busybox:1.29-2",
	"registry.k8s.io/e2e-test-images/nginx:1.14-2",
	"registry.k8s.io/e2e-test-images/httpd:2.4.39-4",
	"registry.k8s.io/e2e-test-images/nonewprivs:1.3",
	"registry.k8s.io/pause:3.9",
	"k8s.gcr.io/pause:3.9",
	"gcr.io/k8s-staging-cri-tools/hostnet-nginx-amd64:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-latest:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-tag:test",
	"gcr.io/k8s-staging-cri-tools/test-image-tag:all",
	"gcr.io/k8s-staging-cri-tools/test-image-1:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-2:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-3:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-tags:1",
	"gcr.io/k8s-staging-cri-tools/test-image-tags:2",
	"gcr.io/k8s-staging-cri-tools/test-image-tags:3",
	"gcr.io/k8s-staging-cri-tools/test-image-user-uid:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-user-username:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-user-uid-group:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-user-username-group:latest",
	"gcr.io/k8s-staging-cri-tools/test-image-predefined-group:latest",
	"public.ecr.aws/docker/library/busybox:1.35.0-glibc",
	"public.ecr.aws/docker/library/busybox:1-uclibc",
	"public.ecr.aws/docker/library/busybox:1",
	"public.ecr.aws/docker/library/busybox:1-glibc",
	"public.ecr.aws/docker/library/busybox:1-musl",
}

func TestCatalog(t *testing.T) {
	testutil.Require(t, "busybox", "go", "ipcs", "pgrep")
	h, err := buildHelpers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	images, err := catalog(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range critestImages {
		if images[n] == nil {
			t.Errorf("%s is not served", n)
		}
	}
	if _, err := byRepoPath(images); err != nil {
		t.Error(err)
	}
	digest := func(n string) v1.Hash {
		d, err := images[n].Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cri := "gcr.io/k8s-staging-cri-tools/"
	if digest(cri+"test-image-tags:1") != digest(cri+"test-image-tags:3") {
		t.Error("test-image-tags:1 and :3 must be one image")
	}
	if digest(cri+"test-image-1:latest") == digest(cri+"test-image-2:latest") {
		t.Error("test-image-1 and -2 must differ")
	}
	if digest("registry.k8s.io/pause:3.9") != digest("k8s.gcr.io/pause:3.9") {
		t.Error("pause:3.9 must be one image on both registries")
	}
	for name, user := range map[string]string{
		"test-image-user-uid:latest":            "1002",
		"test-image-user-username:latest":       "www-data",
		"test-image-user-uid-group:latest":      "1003:1004",
		"test-image-user-username-group:latest": "www-data:1004",
		"test-image-predefined-group:latest":    "1000",
	} {
		cf, err := images[cri+name].ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != user {
			t.Errorf("%s: user %q, want %q", name, cf.Config.User, user)
		}
	}
}

// CoreDNS's image is the binary alone, run as its entrypoint, on kubeadm's name for it.
func TestCoreDNSImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := corednsImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/coredns" {
		t.Fatalf("config %+v %v", cfg, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, strings.TrimPrefix(h.Name, "/"))
		}
		rc.Close()
	}
	if !slices.Contains(names, "coredns") || slices.Contains(names, "bin/sh") {
		t.Errorf("the layer holds %v, want the binary and no busybox", names)
	}
	if corednsName != "registry.k8s.io/coredns/coredns:v1.12.1" {
		t.Errorf("CoreDNS is served as %s", corednsName)
	}
}
